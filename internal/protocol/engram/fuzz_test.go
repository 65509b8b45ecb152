package engram

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// FuzzParseBody: decrypted bodies come from whoever holds the agent key. Parsing must never
// panic, and whatever it accepts must re-encode to a body that parses back to the same value.
func FuzzParseBody(f *testing.F) {
	for _, v := range vectors {
		f.Add([]byte(v.wantBody))
	}
	for _, s := range []string{`{"slug":"mem/x","value":"a","value":"b"}`, `{"slug":"mem/x","value":"\ud800"}`,
		`{"slug":"core","profile":"\ud83d\udc1d","x":[{"a":1},{"a":2}]}`, `{}`, `[`, `{"slug":"mem/x","value":null} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := ParseBody(in)
		if err != nil {
			return
		}
		if ValidateSlug(b.Slug) != nil {
			t.Fatalf("accepted slug %q outside the grammar", b.Slug)
		}
		enc, err := b.Marshal()
		if err != nil {
			// The canonical form is never longer than an accepted input, so it always fits.
			t.Fatalf("accepted %q but cannot re-encode it: %v", in, err)
		}
		back, err := ParseBody(enc)
		if err != nil || back != b {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", enc, back, err, b)
		}
	})
}

// FuzzOpen: a correctly signed and encrypted record with arbitrary plaintext and d tag. Open
// must never panic and must accept exactly when the body parses and its slug derives the d tag.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(vectors[0].wantBody), "mem/example")
	f.Add([]byte(vectors[3].wantBody), "mem/example")
	f.Add([]byte(`{"slug":"mem/example","value":1}`), "mem/example")
	a := mustAgent(f)
	o := mustOwner(f)
	f.Fuzz(func(t *testing.T, plain []byte, dslug string) {
		if len(plain) == 0 || len(plain) > protocol.NIP44MaxPlaintext {
			return
		}
		content, err := protocol.Encrypt44(string(plain), a.ConversationKey(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := nostr.Event{Kind: 30174, CreatedAt: 1, Content: content,
			Tags: nostr.Tags{{"d", a.DTag(dslug)}, {"p", ownerPK}}}
		if err := protocol.SignEvent(&ev, agentSK, nil); err != nil {
			t.Fatal(err)
		}
		got, err := o.Open(&ev)
		want, perr := ParseBody(plain)
		ok := perr == nil && want.Slug == dslug
		if (err == nil) != ok {
			t.Fatalf("Open err = %v, but parse err = %v and slug %q vs d slug %q", err, perr, want.Slug, dslug)
		}
		if err == nil && got != want {
			t.Fatalf("Open = %+v, ParseBody = %+v", got, want)
		}
	})
}

// FuzzApplyPatch: diffs come from the agent or the user. Never panic; never report success
// without changing the value.
func FuzzApplyPatch(f *testing.F) {
	f.Add(value, "@@ -2,3 +2,3 @@\n two\n-three\n+THREE\n four\n")
	f.Add("a\nb", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n")
	f.Add("", "@@ -0,0 +1,2 @@\n+hello\n+world\n")
	f.Add("a\n", "@@ -1 +0,0 @@\n-a\n")
	f.Fuzz(func(t *testing.T, current, diff string) {
		got, err := ApplyPatch(current, diff)
		if err == nil && got == current {
			t.Fatalf("reported success for a no-op")
		}
	})
}
