package harness

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// quotaPattern finds a wait that a provider's error names ("rate limited, retry in 30s",
// "quota exceeded; try again in 2 hours", "usage limit resets in 45 minutes").
var quotaPattern = regexp.MustCompile(`(?i)(?:retry|try again|resets?|available again)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?)\b`)

// maxQuotaWaits bounds how often one batch waits out a named reset before ordinary retries
// (and, eventually, a dead letter) take over: an agent that always says "retry in 1s" must not
// keep a batch alive forever.
const maxQuotaWaits = 20

// maxQuotaWait bounds a named wait, so a garbled message cannot park a channel for days.
const maxQuotaWait = 24 * time.Hour

// quotaReset returns the wait an agent's error message names, if any.
func quotaReset(msg string) (time.Duration, bool) {
	m := quotaPattern.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	unit := time.Second
	switch u := strings.ToLower(m[2]); {
	case strings.HasPrefix(u, "ms") || strings.HasPrefix(u, "milli"):
		unit = time.Millisecond
	case strings.HasPrefix(u, "h"):
		unit = time.Hour
	case strings.HasPrefix(u, "m"):
		unit = time.Minute
	}
	return min(time.Duration(n*float64(unit)), maxQuotaWait), true
}
