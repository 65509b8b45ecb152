package relay

import (
	"encoding/json"
	"strings"
	"testing"
)

var frameSeeds = []string{
	`["EVENT",{"id":"` + strings.Repeat("a", 64) + `","pubkey":"` + strings.Repeat("b", 64) + `","created_at":1,"kind":1,"tags":[["h","x"]],"content":"hi","sig":"` + strings.Repeat("c", 128) + `"}]`,
	`["REQ","sub",{"kinds":[9],"#h":["c"],"limit":10},{"ids":["` + strings.Repeat("a", 64) + `"]}]`,
	`["COUNT","c",{"kinds":[1]}]`,
	`["CLOSE","sub"]`,
	`["AUTH",{"kind":22242}]`,
	`["REQ","s",{"until":5,"before_id":"` + strings.Repeat("0", 64) + `"}]`,
	`["REQ","s",{"#buzz-channel":["x"]}]`,
	`["REQ",""]`, `[]`, `{}`, `null`, `["EVENT",[]]`, `["REQ","s",{"limit":-1}]`, `["REQ","s",{"kinds":[1e9]}]`,
	`["EVENT",{"tags":[[]]}]`, `["EVENT",{"tags":[[1]]}]`, "[\"REQ\",\"s\",{\"search\":\"\\u0000\"}]",
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := parseFrame(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid: ") {
				t.Fatalf("error %q lacks the invalid: prefix", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not one line", err)
			}
			return
		}
		switch fr.Type {
		case "EVENT", "AUTH":
			if fr.Event == nil {
				t.Fatal("EVENT/AUTH without event")
			}
		case "REQ", "COUNT":
			if fr.SubID == "" || len(fr.SubID) > maxSubIDLen || len(fr.Filters) == 0 || len(fr.Filters) > maxFilters {
				t.Fatalf("bad REQ accepted: %+v", fr)
			}
			for _, flt := range fr.Filters {
				if flt.BeforeID != "" && flt.Until == nil {
					t.Fatal("before_id without until accepted")
				}
				if l := effectiveLimit(flt); l < 0 || l > maxLimit {
					t.Fatalf("limit %d out of range", l)
				}
			}
		case "CLOSE":
			if fr.SubID == "" {
				t.Fatal("CLOSE without sub id")
			}
		default:
			t.Fatalf("unknown type %q accepted", fr.Type)
		}
	})
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"kinds":[0,9]}`, `{"#h":["x"],"#p":[]}`, `{"limit":0}`, `{"limit":999999}`,
		`{"since":1,"until":2,"before_id":"` + strings.Repeat("f", 64) + `"}`, `{"authors":["ABC"]}`,
		`{"search":"a \"b\" OR c*"}`, `{"ids":null}`, `[]`, `{"#":["x"]}`, `{"#hh":["x"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		flt, err := parseFilter(data)
		if err != nil {
			return
		}
		for name := range flt.Tags {
			if len(name) != 1 {
				t.Fatalf("multi-letter tag filter %q accepted", name)
			}
		}
		for _, k := range flt.Kinds {
			if k < 0 || k > 65535 {
				t.Fatalf("kind %d accepted", k)
			}
		}
		// A filter that parsed must survive a JSON round trip through go-nostr's encoder.
		if _, err := json.Marshal(flt.Filter); err != nil {
			t.Fatalf("marshal: %v", err)
		}
	})
}

func TestParseFilterReadsBuzzFields(t *testing.T) {
	id := strings.Repeat("e", 64)
	flt, err := parseFilter([]byte(`{"kinds":[9],"#h":["c1"],"until":100,"before_id":"` + id + `","limit":5,"depth_limit":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if flt.BeforeID != id || *flt.Until != 100 || flt.Limit != 5 || flt.Tags["h"][0] != "c1" || flt.Kinds[0] != 9 {
		t.Fatalf("parsed %+v", flt)
	}
}

func TestEffectiveLimitDefaultsAndCaps(t *testing.T) {
	for in, want := range map[string]int{`{}`: 500, `{"limit":7}`: 7, `{"limit":5000}`: 2000, `{"limit":0}`: 0} {
		flt, err := parseFilter([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := effectiveLimit(flt); got != want {
			t.Errorf("%s: limit %d, want %d", in, got, want)
		}
	}
}
