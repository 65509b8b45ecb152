package ownerauth

import (
	"strings"
	"testing"
)

// FuzzParse: BUZZ_AUTH_TAG and profile tags are outside input. Parse must never panic; what it
// accepts must survive a JSON round trip unchanged, and Verify must not panic on it.
func FuzzParse(f *testing.F) {
	f.Add(`["auth","` + ownerPK + `","` + conditions + `","` + vecSig + `"]`)
	f.Add(`["auth","` + ownerPK + `","","` + vecSig + `"]`)
	f.Add(`["auth","` + ownerPK + `","kind=01","` + vecSig + `"]`)
	f.Add(`["auth",1,2,3]`)
	f.Add(`["auth","\u0061"]`)
	f.Fuzz(func(t *testing.T, s string) {
		tag, err := Parse(s)
		if err != nil {
			return
		}
		back, err := Parse(tag.JSON())
		if err != nil || back != tag {
			t.Fatalf("round trip of %q: %+v, %v", tag.JSON(), back, err)
		}
		_ = tag.Verify(agentPK)
		_ = tag.Allows(1, 0)
	})
}

// FuzzConditions: accepted conditions are canonical clause lists that evaluate without error.
func FuzzConditions(f *testing.F) {
	for _, c := range []string{"", "kind=1&created_at<1713957000", "kind=01", "created_at>4294967295", "&"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		if ValidateConditions(c) != nil {
			return
		}
		if strings.ContainsAny(c, " \t\r\n") || strings.Contains(c, "&&") || strings.HasPrefix(c, "&") || strings.HasSuffix(c, "&") {
			t.Fatalf("accepted malformed conditions %q", c)
		}
		tag := Tag{Conditions: c}
		_ = tag.check(1, 5)
	})
}
