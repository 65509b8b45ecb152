package protocol

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

var blobNow = time.Unix(1_700_000_000, 0)

func TestBlobAuthSignedHereVerifiesWithItsScope(t *testing.T) {
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	h, err := SignBlobAuth(sk, BlobUpload, []string{testSHA}, "Relay.Example", blobNow, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, err := VerifyBlobAuth(h, BlobUpload, blobNow)
	if err != nil {
		t.Fatal(err)
	}
	if a.Pubkey != pk || !a.NamesBlob(testSHA) || !a.NamesServer("relay.example") || !a.Expires.Equal(blobNow.Add(5*time.Minute)) {
		t.Fatalf("got %+v", a)
	}
}

// blobAuthHeader signs ev and encodes it with enc.
func blobAuthHeader(t *testing.T, ev nostr.Event, enc *base64.Encoding) string {
	t.Helper()
	if err := Sign(&ev, nostr.GeneratePrivateKey()); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ev)
	return "Nostr " + enc.EncodeToString(raw)
}

func uploadAuth(mod func(*nostr.Event)) nostr.Event {
	ev := nostr.Event{Kind: KindBlobAuth, CreatedAt: nostr.Timestamp(blobNow.Unix() - 5), Content: "Upload",
		Tags: nostr.Tags{{"t", "upload"}, {"x", testSHA}, {"expiration", "1700000600"}}}
	if mod != nil {
		mod(&ev)
	}
	return ev
}

func TestBlobAuthAcceptsStandardBase64FromOlderClients(t *testing.T) {
	if _, err := VerifyBlobAuth(blobAuthHeader(t, uploadAuth(nil), base64.StdEncoding), BlobUpload, blobNow); err != nil {
		t.Fatal(err)
	}
}

func TestBlobAuthRefusals(t *testing.T) {
	for name, mod := range map[string]func(*nostr.Event){
		"wrong kind":        func(ev *nostr.Event) { ev.Kind = KindHTTPAuth },
		"wrong verb":        func(ev *nostr.Event) { ev.Tags[0] = nostr.Tag{"t", "delete"} },
		"expired":           func(ev *nostr.Event) { ev.Tags[2] = nostr.Tag{"expiration", "1700000000"} },
		"no expiration":     func(ev *nostr.Event) { ev.Tags = ev.Tags[:2] },
		"two expirations":   func(ev *nostr.Event) { ev.Tags = append(ev.Tags, nostr.Tag{"expiration", "1700000900"}) },
		"bad expiration":    func(ev *nostr.Event) { ev.Tags[2] = nostr.Tag{"expiration", "soon"} },
		"created in future": func(ev *nostr.Event) { ev.CreatedAt = nostr.Timestamp(blobNow.Unix() + 120) },
	} {
		if _, err := VerifyBlobAuth(blobAuthHeader(t, uploadAuth(mod), base64.RawURLEncoding), BlobUpload, blobNow); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestBlobAuthRefusesAnEventChangedAfterSigning(t *testing.T) {
	h := blobAuthHeader(t, uploadAuth(nil), base64.RawURLEncoding)
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(h, "Nostr "))
	var signed nostr.Event
	if err := json.Unmarshal(raw, &signed); err != nil {
		t.Fatal(err)
	}
	signed.Tags = append(signed.Tags, nostr.Tag{"x", strings.Repeat("a", 64)})
	raw, _ = json.Marshal(signed)
	if _, err := VerifyBlobAuth("Nostr "+base64.RawURLEncoding.EncodeToString(raw), BlobUpload, blobNow); err == nil {
		t.Fatal("a token widened after signing was accepted")
	}
}

func TestIsBlobAuthTellsBlossomFromNIP98(t *testing.T) {
	sk := nostr.GeneratePrivateKey()
	nip98, _ := SignHTTPAuth(sk, "http://127.0.0.1:3000/media/"+testSHA, "GET", nil, blobNow)
	blossom, _ := SignBlobAuth(sk, BlobGet, []string{testSHA}, "", blobNow, time.Minute)
	if IsBlobAuth(nip98) || !IsBlobAuth(blossom) || IsBlobAuth("Nostr %%") {
		t.Fatal("misclassified")
	}
}

func FuzzVerifyBlobAuth(f *testing.F) {
	sk := nostr.GeneratePrivateKey()
	good, _ := SignBlobAuth(sk, BlobUpload, []string{testSHA}, "r.example", blobNow, time.Minute)
	f.Add(good)
	f.Add("Nostr " + base64.RawURLEncoding.EncodeToString([]byte(`{"kind":24242,"tags":[["expiration","x"]]}`)))
	f.Add("Nostr e30")
	f.Add("")
	f.Fuzz(func(t *testing.T, header string) {
		a, err := VerifyBlobAuth(header, BlobUpload, blobNow)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if !a.Expires.After(blobNow) || !IsHex64(a.Pubkey) {
			t.Fatalf("accepted %+v", a)
		}
		for _, h := range a.Hashes {
			if !IsHex64(h) {
				t.Fatalf("accepted hash %q", h)
			}
		}
	})
}
