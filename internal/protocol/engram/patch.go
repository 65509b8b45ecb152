package engram

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Hash is the base hash of a value for `buzz mem hash` and `patch --base-hash`: lowercase hex
// SHA-256 of its UTF-8 bytes, the same as `printf '%s' "$value" | sha256sum`.
func Hash(value string) string {
	h := sha256.Sum256([]byte(value))
	return hex.EncodeToString(h[:])
}

// CheckBaseHash compares a --base-hash argument (64 hex, any case) with the current value.
// ErrConflict means the value changed since the patch was made.
func CheckBaseHash(baseHash, current string) error {
	if len(baseHash) != 64 {
		return errors.New("--base-hash must be a 64-character hex sha256 digest")
	}
	if _, err := hex.DecodeString(baseHash); err != nil {
		return errors.New("--base-hash must be a 64-character hex sha256 digest")
	}
	if got := Hash(current); got != strings.ToLower(baseHash) {
		return fmt.Errorf("%w: the value's sha256 is %s, not %s; fetch it again and regenerate the patch",
			ErrConflict, got, strings.ToLower(baseHash))
	}
	return nil
}

// Patch errors a caller maps to exit codes.
var (
	// ErrConflict: the value is not the one the edit was based on.
	ErrConflict = errors.New("conflict")
	// ErrNoOp: the patch leaves the value byte-identical, so nothing must be published.
	ErrNoOp = errors.New("patch is a no-op: the result is byte-identical to the current value")
)

// hunk is one @@ section: the old start line (1-based, 0 for an insertion into an empty value),
// the lines it expects (context and deletions) and the lines it leaves (context and insertions).
type hunk struct {
	oldStart int
	old, new []string
}

// ApplyPatch applies a single-file unified diff to current, strictly: every hunk must match the
// value byte for byte at exactly the line it declares (no fuzz, no offset), hunks must be in
// order and must not overlap, a multi-file diff is refused, and a result equal to current is
// ErrNoOp. "\ No newline at end of file" is honoured on either side.
func ApplyPatch(current, diff string) (string, error) {
	hunks, err := parseDiff(diff)
	if err != nil {
		return "", err
	}
	lines := splitLines(current)
	var out strings.Builder
	next := 0 // index of the first line of current not yet copied
	for i, h := range hunks {
		start := h.oldStart - 1
		if len(h.old) == 0 {
			// A hunk with nothing to match can only be placed safely at the top of an empty value.
			if h.oldStart != 0 || len(lines) != 0 {
				return "", fmt.Errorf("hunk %d has no context lines to check its position against; regenerate the patch with context (diff -u)", i+1)
			}
			start = 0
		}
		if start < next {
			return "", fmt.Errorf("hunk %d starts at line %d, before the end of the previous hunk", i+1, h.oldStart)
		}
		if start+len(h.old) > len(lines) {
			return "", fmt.Errorf("hunk %d expects %d line(s) from line %d, but the value has %d line(s)",
				i+1, len(h.old), h.oldStart, len(lines))
		}
		for j, want := range h.old {
			if got := lines[start+j]; got != want {
				return "", fmt.Errorf("hunk %d does not match line %d: patch has %q, value has %q",
					i+1, start+j+1, want, got)
			}
		}
		for _, l := range lines[next:start] {
			out.WriteString(l)
		}
		for _, l := range h.new {
			out.WriteString(l)
		}
		next = start + len(h.old)
	}
	for _, l := range lines[next:] {
		out.WriteString(l)
	}
	res := out.String()
	if res == current {
		return "", ErrNoOp
	}
	return res, nil
}

// splitLines splits after each newline, keeping it; a last line without one stays as it is.
func splitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// parseDiff reads the optional ---/+++ header and the hunks. Each hunk's body is read by the
// counts in its @@ header, so an empty line inside a hunk is taken as an empty context line (some
// tools strip the leading space).
func parseDiff(diff string) ([]hunk, error) {
	if strings.TrimSpace(diff) == "" {
		return nil, errors.New("the patch is empty")
	}
	raw := splitLines(diff)
	headers := 0
	for _, l := range raw {
		if strings.HasPrefix(l, "--- ") {
			headers++
		}
	}
	if headers > 1 {
		return nil, fmt.Errorf("multi-file patch (%d `--- ` headers): a memory is a single file", headers)
	}
	var hunks []hunk
	i := 0
	// Header lines before the first hunk (diff --git, index, ---, +++) are skipped.
	for i < len(raw) && !strings.HasPrefix(raw[i], "@@") {
		i++
	}
	for i < len(raw) {
		l := strings.TrimRight(raw[i], "\r\n")
		if l == "" {
			i++
			continue
		}
		if !strings.HasPrefix(l, "@@") {
			return nil, fmt.Errorf("malformed unified diff: expected a hunk header, got %q", l)
		}
		h, oldN, newN, err := parseHunkHeader(l)
		if err != nil {
			return nil, err
		}
		i++
		var lastOld, lastNew *string // the line a "\ No newline" marker applies to
		for i < len(raw) && (len(h.old) < oldN || len(h.new) < newN || strings.HasPrefix(raw[i], `\`)) {
			line := raw[i]
			i++
			if strings.HasPrefix(line, `\`) {
				// "\ No newline at end of file": the previous line has no trailing newline.
				if lastOld != nil {
					*lastOld = strings.TrimSuffix(*lastOld, "\n")
				}
				if lastNew != nil {
					*lastNew = strings.TrimSuffix(*lastNew, "\n")
				}
				lastOld, lastNew = nil, nil
				continue
			}
			if !strings.HasSuffix(line, "\n") {
				line += "\n" // the diff's own last line lacks a newline; that says nothing about the value
			}
			op, text := byte(' '), "\n"
			if line != "\n" {
				op, text = line[0], line[1:]
			}
			lastOld, lastNew = nil, nil
			switch op {
			case ' ':
				h.old = append(h.old, text)
				h.new = append(h.new, text)
				lastOld, lastNew = &h.old[len(h.old)-1], &h.new[len(h.new)-1]
			case '-':
				h.old = append(h.old, text)
				lastOld = &h.old[len(h.old)-1]
			case '+':
				h.new = append(h.new, text)
				lastNew = &h.new[len(h.new)-1]
			default:
				return nil, fmt.Errorf("malformed unified diff: unexpected line %q in a hunk", strings.TrimRight(line, "\n"))
			}
			if len(h.old) > oldN || len(h.new) > newN {
				return nil, fmt.Errorf("malformed unified diff: hunk at old line %d has more lines than its header says", h.oldStart)
			}
		}
		if len(h.old) != oldN || len(h.new) != newN {
			return nil, fmt.Errorf("malformed unified diff: hunk at old line %d is truncated", h.oldStart)
		}
		hunks = append(hunks, h)
	}
	if len(hunks) == 0 {
		return nil, errors.New("malformed unified diff: no hunks")
	}
	return hunks, nil
}

// parseHunkHeader reads "@@ -a[,b] +c[,d] @@ optional section text".
func parseHunkHeader(l string) (hunk, int, int, error) {
	bad := fmt.Errorf("malformed hunk header %q", l)
	rest, ok := strings.CutPrefix(l, "@@ -")
	if !ok {
		return hunk{}, 0, 0, bad
	}
	oldR, rest, ok := strings.Cut(rest, " +")
	if !ok {
		return hunk{}, 0, 0, bad
	}
	newR, _, ok := strings.Cut(rest, " @@")
	if !ok {
		return hunk{}, 0, 0, bad
	}
	oldStart, oldN, err1 := parseRange(oldR)
	_, newN, err2 := parseRange(newR)
	if err1 != nil || err2 != nil {
		return hunk{}, 0, 0, bad
	}
	if oldStart == 0 && oldN != 0 {
		return hunk{}, 0, 0, bad
	}
	return hunk{oldStart: oldStart}, oldN, newN, nil
}

func parseRange(s string) (start, n int, err error) {
	a, b, has := strings.Cut(s, ",")
	if start, err = strconv.Atoi(a); err != nil || start < 0 {
		return 0, 0, errors.New("bad range")
	}
	n = 1
	if has {
		if n, err = strconv.Atoi(b); err != nil || n < 0 {
			return 0, 0, errors.New("bad range")
		}
	}
	const limit = MaxBody + 1 // no hunk of a valid memory can be longer
	if start > limit || n > limit {
		return 0, 0, errors.New("bad range")
	}
	return start, n, nil
}
