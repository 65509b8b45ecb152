package protocol

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

const testSHA = "b1674191a88ec5cdd733e4240a81803105dc412d6c6708d53ab94fc248f4f553"

func TestImetaReadsEveryNIP92Field(t *testing.T) {
	tag := nostr.Tag{"imeta", "url https://r.example/media/" + testSHA + ".png", "m image/PNG", "x " + strings.ToUpper(testSHA),
		"size 1234", "dim 640x480", "alt A screenshot of the failing test", "blurhash eVF$^OI", "fallback https://b.example/a.png"}
	got, ok := ParseImeta(tag)
	want := Attachment{URL: "https://r.example/media/" + testSHA + ".png", Type: "image/png", SHA256: testSHA, Size: 1234,
		Dim: "640x480", Alt: "A screenshot of the failing test", Blurhash: "eVF$^OI", Fallback: []string{"https://b.example/a.png"}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v, want %+v", got, ok, want)
	}
}

func TestImetaWithoutURLOrOtherFieldIsNoAttachment(t *testing.T) {
	for name, tag := range map[string]nostr.Tag{
		"no url":         {"imeta", "m image/png", "x " + testSHA},
		"url only":       {"imeta", "url https://r.example/a.png"},
		"two urls":       {"imeta", "url https://r.example/a.png", "url https://r.example/b.png", "m image/png"},
		"not http":       {"imeta", "url javascript:alert(1)", "m image/png"},
		"no host":        {"imeta", "url https:///a.png", "m image/png"},
		"other tag name": {"imetaX", "url https://r.example/a.png", "m image/png"},
	} {
		if a, ok := ParseImeta(tag); ok {
			t.Errorf("%s: parsed as %+v", name, a)
		}
	}
}

func TestImetaMalformedFieldsAreLeftEmpty(t *testing.T) {
	a, ok := ParseImeta(nostr.Tag{"imeta", "url https://r.example/a", "m not a type", "x 1234", "size -5", "nospace", "alt  "})
	if !ok {
		t.Fatal("a tag with a url and other (malformed) fields is still an attachment")
	}
	if a.Type != "" || a.SHA256 != "" || a.Size != 0 || a.Alt != "" {
		t.Fatalf("malformed fields kept: %+v", a)
	}
}

func TestAttachmentsKeepOnePerURLAndAtMostTheCap(t *testing.T) {
	tags := nostr.Tags{{"h", "x"}}
	tags = append(tags, nostr.Tag{"imeta", "url https://r.example/a", "m image/png"}, nostr.Tag{"imeta", "url https://r.example/a", "m image/gif"})
	for i := range MaxAttachments + 5 {
		tags = append(tags, nostr.Tag{"imeta", "url https://r.example/" + strings.Repeat("b", i+1), "m text/plain"})
	}
	got := Attachments(tags)
	if len(got) != MaxAttachments {
		t.Fatalf("%d attachments, want the cap %d", len(got), MaxAttachments)
	}
	if got[0].Type != "image/png" {
		t.Fatalf("the first imeta of a URL must win, got %+v", got[0])
	}
}

func TestAttachmentTagRoundTrips(t *testing.T) {
	a := Attachment{URL: "https://r.example/x.png", Type: "image/png", SHA256: testSHA, Size: 9, Alt: "two words"}
	got, ok := ParseImeta(a.Tag())
	if !ok || !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
}

func TestContentWithAttachmentsPutsEachURLOnALineAfterTheText(t *testing.T) {
	atts := []Attachment{{URL: "https://r.example/a.png"}, {URL: "https://r.example/b.pdf"}}
	if got := ContentWithAttachments("look", atts); got != "look\nhttps://r.example/a.png\nhttps://r.example/b.pdf" {
		t.Fatalf("got %q", got)
	}
	if got := ContentWithAttachments("  ", atts[:1]); got != "https://r.example/a.png" {
		t.Fatalf("blank text: got %q", got)
	}
}

func TestImetaHashesListEveryValidX(t *testing.T) {
	tags := nostr.Tags{
		{"imeta", "url https://r.example/a", "x " + testSHA},
		{"imeta", "url https://r.example/b", "x nothex"},
		{"x", strings.Repeat("c", 64)},
	}
	if got := ImetaHashes(tags); !reflect.DeepEqual(got, []string{testSHA}) {
		t.Fatalf("got %v", got)
	}
}

func FuzzParseImeta(f *testing.F) {
	f.Add("url https://r.example/a.png", "m image/png", "x "+testSHA, "size 12")
	f.Add("url http://[::1]:3000/x", "alt", "size 99999999999999999999", "fallback ftp://x")
	f.Add("", " ", "url ", "m /")
	f.Fuzz(func(t *testing.T, e1, e2, e3, e4 string) {
		a, ok := ParseImeta(nostr.Tag{"imeta", e1, e2, e3, e4})
		if !ok {
			return
		}
		// Whatever is accepted is well formed, and (when a field beyond the url survived the
		// checks) writes back as a tag that reads the same.
		if !webURL(a.URL) || (a.SHA256 != "" && !IsHex64(a.SHA256)) || a.Size < 0 || (a.Type != "" && MediaType(a.Type) != a.Type) {
			t.Fatalf("accepted malformed attachment %+v", a)
		}
		if len(a.Tag()) == 2 {
			return
		}
		if b, ok := ParseImeta(a.Tag()); !ok || b.URL != a.URL || b.Type != a.Type || b.SHA256 != a.SHA256 || b.Size != a.Size {
			t.Fatalf("round trip of %+v gave %+v %v", a, b, ok)
		}
	})
}
