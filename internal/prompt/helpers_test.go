package prompt

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const (
	chanID = "3f1c2a9e-5b7d-4e8a-9c01-6d2f8b4a7e10"
	t0     = nostr.Timestamp(1_700_000_000)
)

// Fixed identities: hex strings valid for npub encoding, readable in goldens.
var (
	alice = hexN(0xa11ce)
	bob   = hexN(0xb0b)
	agent = hexN(0xa9e47)
	other = hexN(0x07e4)
)

func hexN(n int) string { return fmt.Sprintf("%064x", n) }

func idN(n int) string { return fmt.Sprintf("%064x", 0xe0000+n) }

var stdChannel = Channel{ID: chanID, Name: "eng", Type: "stream"}

var stdProfiles = map[string]Profile{
	alice: {Label: "Alice"},
	bob:   {Label: "Bob"},
	agent: {Label: "Builder Bot", IsAgent: true},
	other: {Label: "Reviewer Bot", IsAgent: true},
}

// msg builds a channel message n seconds after t0 with id idN(n).
func msg(n int, author, content string, tags ...nostr.Tag) nostr.Event {
	all := nostr.Tags{{"h", chanID}}
	all = append(all, tags...)
	return nostr.Event{ID: idN(n), PubKey: author, CreatedAt: t0 + nostr.Timestamp(n), Kind: 9, Tags: all, Content: content}
}

// reply builds a message replying to parent in the thread of root (direct when equal).
func reply(n int, author, content, root, parent string, extra ...nostr.Tag) nostr.Event {
	tags := []nostr.Tag{}
	for _, t := range protocol.ReplyTags(root, parent) {
		tags = append(tags, t)
	}
	return msg(n, author, content, append(tags, extra...)...)
}

func mention(pk string) nostr.Tag { return nostr.Tag{"p", pk} }

func testStanding() Standing {
	return Standing{
		Base:   "You are an agent in Buzz. Reply with buzz messages send.",
		System: "You are Builder Bot, a careful Go engineer.",
		Team:   "  Ship small PRs.  ",
		Core:   "- Alice owns the relay.\n- Bob reviews.",
		Canvas: &Canvas{EventID: idN(900), Modified: time.Unix(int64(t0)-3600, 0), ChannelID: chanID},
	}
}

func joinBlocks(blocks []string) string {
	var b strings.Builder
	for i, bl := range blocks {
		fmt.Fprintf(&b, "<<<block %d>>>\n%s\n", i+1, bl)
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s mismatch (run go test -update to accept)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// renderBlocks is Build's text blocks alone, which is all most tests look at.
func renderBlocks(in Input) []string { return Build(in).Blocks }
