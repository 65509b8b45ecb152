package engram

import (
	"errors"
	"strings"
	"testing"
)

func TestHashIsSha256OfTheValueBytes(t *testing.T) {
	// printf '%s' 'hello, agent memory' | sha256sum
	if got := Hash("hello, agent memory"); got != "a631cf07f4fc766f27d65110336edad79a8d41c84046a0af289310eb27083e99" {
		t.Fatalf("Hash = %s", got)
	}
	if got := Hash(""); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("Hash(\"\") = %s", got)
	}
}

func TestCheckBaseHash(t *testing.T) {
	h := Hash("v")
	if err := CheckBaseHash(strings.ToUpper(h), "v"); err != nil {
		t.Errorf("matching hash in upper case refused: %v", err)
	}
	if err := CheckBaseHash(h, "w"); !errors.Is(err, ErrConflict) {
		t.Errorf("changed value: err = %v, want ErrConflict", err)
	}
	for _, bad := range []string{"", h[:63], h[:63] + "g"} {
		if err := CheckBaseHash(bad, "v"); err == nil || errors.Is(err, ErrConflict) {
			t.Errorf("malformed base hash %q: err = %v, want a usage error", bad, err)
		}
	}
}

const value = "one\ntwo\nthree\nfour\nfive\n"

func TestApplyPatch(t *testing.T) {
	cases := []struct{ name, current, diff, want string }{
		{"replace a middle line", value,
			"--- a\n+++ b\n@@ -2,3 +2,3 @@\n two\n-three\n+THREE\n four\n", "one\ntwo\nTHREE\nfour\nfive\n"},
		{"git headers and section text", value,
			"diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@ heading\n one\n+one and a half\n two\n", "one\none and a half\ntwo\nthree\nfour\nfive\n"},
		{"two hunks", value,
			"@@ -1,2 +1,2 @@\n-one\n+ONE\n two\n@@ -4,2 +4,2 @@\n four\n-five\n+FIVE\n", "ONE\ntwo\nthree\nfour\nFIVE\n"},
		{"add a trailing newline", "a\nb",
			"@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n", "a\nb\n"},
		{"remove the trailing newline", "a\nb\n",
			"@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n", "a\nb"},
		{"context line without newline at end", "a\nb",
			"@@ -1,2 +1,3 @@\n+z\n a\n b\n\\ No newline at end of file\n", "z\na\nb"},
		{"insert into an empty value", "",
			"--- /dev/null\n+++ b\n@@ -0,0 +1,2 @@\n+hello\n+world\n", "hello\nworld\n"},
		{"empty line taken as empty context", "a\n\nb\n",
			"@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n", "a\n\nc\n"},
		{"delete everything", "a\n", "@@ -1 +0,0 @@\n-a\n", ""},
		{"diff without a final newline", value, "@@ -5 +5 @@\n-five\n+5", "one\ntwo\nthree\nfour\n5\n"},
	}
	for _, c := range cases {
		got, err := ApplyPatch(c.current, c.diff)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestApplyPatchRefuses(t *testing.T) {
	cases := []struct{ name, current, diff string }{
		{"hunk at the wrong line (no offset)", value, "@@ -1,2 +1,2 @@\n two\n-three\n+THREE\n"},
		{"context differs (no fuzz)", value, "@@ -2,2 +2,2 @@\n two\n-THREEE\n+x\n"},
		{"context missing its newline", "a\nb\n", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"},
		{"beyond the end", value, "@@ -5,2 +5,2 @@\n five\n-six\n+seven\n"},
		{"multi-file", value, "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-one\n+1\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-one\n+1\n"},
		{"no hunks", value, "--- a\n+++ b\n"},
		{"empty", value, ""},
		{"garbage", value, "hello\n"},
		{"truncated hunk", value, "@@ -1,3 +1,3 @@\n one\n two\n"},
		{"more lines than the header", value, "@@ -1,1 +1,1 @@\n-one\n+1\n+2\n"},
		{"bad line prefix", value, "@@ -1,1 +1,1 @@\n*one\n+1\n"},
		{"bad header", value, "@@ -x +1 @@\n-one\n+1\n"},
		{"overlapping hunks", value, "@@ -2,1 +2,1 @@\n-two\n+2\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"},
		{"pure insertion without context into a non-empty value", value, "@@ -2,0 +3,1 @@\n+x\n"},
		{"insertion at top of a non-empty value", value, "@@ -0,0 +1,1 @@\n+x\n"},
		{"old start 0 with a count", value, "@@ -0,1 +1,1 @@\n-one\n+x\n"},
		{"huge range", value, "@@ -1,99999999999 +1 @@\n-one\n+x\n"},
	}
	for _, c := range cases {
		if got, err := ApplyPatch(c.current, c.diff); err == nil {
			t.Errorf("%s: applied, got %q", c.name, got)
		}
	}
}

func TestApplyPatchRefusesANoOp(t *testing.T) {
	_, err := ApplyPatch(value, "@@ -1,1 +1,1 @@\n-one\n+one\n")
	if !errors.Is(err, ErrNoOp) {
		t.Fatalf("err = %v, want ErrNoOp", err)
	}
}
