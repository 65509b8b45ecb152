package provider

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll decodes every event of a stream, and the error that ended it
// (nil for a clean end).
func readAll(r io.Reader) ([]sseEvent, error) {
	s := newSSEReader(r)
	var out []sseEvent
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func mustReadAll(t *testing.T, stream string) []sseEvent {
	t.Helper()
	evs, err := readAll(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestSSEJoinsMultiLineDataAndSkipsComments(t *testing.T) {
	got := mustReadAll(t, ": hello\ndata: {\"a\":\ndata:1}\n: between\n\ndata:  two spaces\n\n")
	want := []sseEvent{{Data: "{\"a\":\n1}"}, {Data: " two spaces"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestSSEAcceptsCRLFAndLoneCRLineEnds(t *testing.T) {
	got := mustReadAll(t, "event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n")
	want := []sseEvent{{Name: "a", Data: "1"}, {Name: "b", Data: "2"}, {Data: "3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestSSEKeepsEventNamesAndDropsEventsWithoutData(t *testing.T) {
	got := mustReadAll(t, "\ufeffevent: ping\n\nevent: message_stop\nid: 7\nretry: 10\ndata: {}\n\ndata\n\n")
	want := []sseEvent{{Name: "message_stop", Data: "{}"}, {Data: ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestSSEReturnsALastEventCutOffByTheEnd(t *testing.T) {
	got := mustReadAll(t, "data: [DONE]")
	if want := []sseEvent{{Data: "[DONE]"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestSSERefusesAnEventLargerThanTheLimit(t *testing.T) {
	line := "data: " + strings.Repeat("x", maxEventBytes/2) + "\n"
	_, err := readAll(strings.NewReader(line + line + line + "\n"))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err = %v, want the size limit", err)
	}
}

func TestSSEPassesOnAReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := readAll(io.MultiReader(strings.NewReader("data: 1\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}

// FuzzSSE checks that decoding never depends on how the bytes arrive, and
// that no event carries a line break other than the "\n" joining data lines.
func FuzzSSE(f *testing.F) {
	f.Add("event: a\r\ndata: 1\r\n\r\n")
	f.Add(": c\ndata: x\ndata: y\n\ndata: [DONE]\n\n")
	f.Add("data: tail\r")
	f.Add("\ufeffdata:\n\nevent\n:\n\r\n")
	f.Fuzz(func(t *testing.T, stream string) {
		whole, err1 := readAll(strings.NewReader(stream))
		bytewise, err2 := readAll(iotest.OneByteReader(strings.NewReader(stream)))
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("whole %q (%v) != byte by byte %q (%v)", whole, err1, bytewise, err2)
		}
		for _, ev := range whole {
			if strings.ContainsAny(ev.Name, "\r\n") || strings.Contains(ev.Data, "\r") {
				t.Fatalf("line break inside %q", ev)
			}
		}
	})
}

// FuzzSSERoundTrip writes one event the way servers do and reads it back.
func FuzzSSERoundTrip(f *testing.F) {
	f.Add("content_block_delta", "{\"a\":1}")
	f.Add("", "two\nlines")
	f.Add(" spaced", " :colon\n\nblank")
	f.Fuzz(func(t *testing.T, name, data string) {
		name = strings.NewReplacer("\r", "", "\n", "").Replace(name)
		data = strings.ReplaceAll(data, "\r", "")
		var b strings.Builder
		if name != "" {
			b.WriteString("event: " + name + "\n")
		}
		for _, line := range strings.Split(data, "\n") {
			b.WriteString("data: " + line + "\n")
		}
		b.WriteString("\n")
		got := mustReadAll(t, b.String())
		if want := []sseEvent{{Name: name, Data: data}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("read back %q, want %q", got, want)
		}
	})
}
