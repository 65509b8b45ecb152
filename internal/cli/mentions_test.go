package cli

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
)

func TestStripCodeBlanksFencesAndSpansKeepingLength(t *testing.T) {
	cases := map[string]string{
		"a `@x` b":                   "a      b",
		"```\n@x\n```\n@y":           "   \n  \n   \n@y",
		"~~~~\n@x\n~~~\n~~~~\n@y":    "    \n  \n   \n    \n@y",
		"``a ` @x``":                 "          ",
		"unclosed `@x":               "unclosed `@x",
		"\\`@x` @y`":                 "\\`@x     ",
		"```\r\n@x\r\n```\r\n@y":     "   \r\n  \r\n   \r\n@y",
		"    ```\n@x":                "    ```\n@x", // indented 4: not a fence, single backtick run unclosed
		"span `across\n@x` lines @y": "span        \n    lines @y",
	}
	for in, want := range cases {
		if got := StripCode(in); got != want {
			t.Errorf("StripCode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAtMentionsPrefersLongestKnownName(t *testing.T) {
	known := []string{"Ada", "Ada Lovelace", "bob"}
	got := AtMentions("@ada lovelace, @Ada and @bob. cc @carol-x! mail me@host.com @@nope", known)
	want := []string{"ada lovelace", "ada", "bob", "carol-x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestAtMentionsNeedsWordBoundaryAfterKnownName(t *testing.T) {
	got := AtMentions("@bobby and (@bob)", []string{"bob"})
	if want := []string{"bobby", "bob"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestResolveNamesFlagsUnresolvedAndAmbiguous(t *testing.T) {
	profiles := map[string]string{
		"p1": `{"display_name":"Sam","name":"sam1"}`,
		"p2": `{"name":"sam"}`,
		"p3": `{"display_name":"Zoe"}`,
		"p4": `not json`,
	}
	res := resolveNames([]string{"zoe", "sam", "nobody", "sam1"}, profiles)
	if !reflect.DeepEqual(res.Pubkeys, []string{"p3", "p1"}) || !reflect.DeepEqual(res.Unresolved, []string{"nobody"}) ||
		!reflect.DeepEqual(res.Ambiguous["sam"], []string{"p1", "p2"}) {
		t.Fatalf("got %+v", res)
	}
}

func TestNostrURIPubkeysDecodesNpubs(t *testing.T) {
	pk, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey())
	got := NostrURIPubkeys("ping nostr:" + protocol.Npub(pk) + " and nostr:npub1bad")
	if !reflect.DeepEqual(got, []string{pk}) {
		t.Fatalf("got %v", got)
	}
}

func FuzzStripCode(f *testing.F) {
	for _, s := range []string{"a `b` c", "```\nx\n```", "~~~\n", "`` ` ``", "\\``x``", "\r\n```\r", "é`ü`", "````", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := StripCode(s)
		if len(out) != len(s) {
			t.Fatalf("length changed: %d → %d", len(s), len(out))
		}
		for i := 0; i < len(s); i++ {
			if out[i] != s[i] && out[i] != ' ' {
				t.Fatalf("byte %d changed to %q", i, out[i])
			}
			if (s[i] == '\n' || s[i] == '\r') && out[i] != s[i] {
				t.Fatalf("line break at %d masked", i)
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("masking split a UTF-8 character: %q", out)
		}
		if !strings.Contains(s, "`") && !strings.Contains(s, "~") && out != s {
			t.Fatal("text without code markers changed")
		}
	})
}

func FuzzAtMentions(f *testing.F) {
	f.Add("hi @Ada Lovelace and @bob.", "Ada Lovelace")
	f.Add("@", "")
	f.Add("x@y @z_1-2 @é", "é")
	f.Add("@ada\u00a0x", "ada\u00a0x")
	f.Fuzz(func(t *testing.T, text, known string) {
		got := AtMentions(text, []string{known, strings.ToUpper(known)})
		seen := map[string]bool{}
		for _, n := range got {
			if n == "" || seen[n] {
				t.Fatalf("empty or duplicate name in %q", got)
			}
			seen[n] = true
			if !strings.Contains(strings.ToLower(text), n) && !strings.EqualFold(n, known) {
				t.Fatalf("name %q is not in the text", n)
			}
		}
		if !strings.Contains(text, "@") && len(got) != 0 {
			t.Fatal("names found without @")
		}
	})
}
