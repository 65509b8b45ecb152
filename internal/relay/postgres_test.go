package relay_test

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
)

// privateDir is a temp dir the relay accepts as its data dir (t.TempDir makes them 0755).
func privateDir(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startPGRelay serves a relay node whose store is the PostgreSQL database at dbURL and
// returns its ws:// URL; it stops on test cleanup.
func startPGRelay(t *testing.T, dbURL string) string {
	t.Helper()
	r, err := relay.Open(relay.Config{DataDir: privateDir(t), Database: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Serve(ctx, ln, r) }()
	t.Cleanup(func() { cancel(); <-done })
	return "ws://" + ln.Addr().String()
}

// reqContents sends one REQ and returns the contents of the stored events before EOSE.
func reqContents(t *testing.T, c *rawConn, f nostr.Filter) []string {
	t.Helper()
	c.send("REQ", "q", f)
	var out []string
	for {
		m := c.read()
		switch m[0] {
		case "EVENT":
			out = append(out, m[2].(map[string]any)["content"].(string))
		case "EOSE":
			c.send("CLOSE", "q")
			return out
		case "CLOSED":
			t.Fatalf("REQ %v closed: %v", f, m)
		}
	}
}

func TestPostgresRelayServesPublishedEventsAndHidesPrivateChannelsFromNonMembers(t *testing.T) {
	dbURL := pgtest.URL(t)
	nodeA := startPGRelay(t, dbURL)
	owner, stranger := newUser(), newUser()

	oc := dialRaw(t, nodeA)
	oc.mustAuth(owner.sk, nodeA)
	private, open := uuid.NewString(), uuid.NewString()
	for id, vis := range map[string]string{private: protocol.VisibilityPrivate, open: protocol.VisibilityOpen} {
		if ok := oc.publish(owner.sk, nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{
			{"h", id}, {"name", vis}, {"visibility", vis}, {"channel_type", protocol.TypeStream},
		}}); ok[2] != true {
			t.Fatalf("create %s channel: %v", vis, ok)
		}
	}
	for ch, text := range map[string]string{private: "secret launch plan", open: "public lunch plan"} {
		if ok := oc.publish(owner.sk, msg(ch, text)); ok[2] != true {
			t.Fatalf("publish %q: %v", text, ok)
		}
	}

	messages := nostr.Filter{Kinds: []int{protocol.KindStreamMessage}}
	search := nostr.Filter{Search: "plan"}
	if got := reqContents(t, oc, messages); len(got) != 2 {
		t.Fatalf("owner reads %q, want both messages", got)
	}
	if got := reqContents(t, oc, search); len(got) != 2 {
		t.Fatalf("owner searches %q, want both messages", got)
	}
	sc := dialRaw(t, nodeA)
	sc.mustAuth(stranger.sk, nodeA)
	for name, f := range map[string]nostr.Filter{"messages": messages, "search": search} {
		if got := reqContents(t, sc, f); len(got) != 1 || got[0] != "public lunch plan" {
			t.Fatalf("non-member %s: %q, want only the open channel's message", name, got)
		}
	}

	// A second node on the same database reads what the first stored, with the same rules.
	nodeB := startPGRelay(t, dbURL)
	ob := dialRaw(t, nodeB)
	ob.mustAuth(owner.sk, nodeB)
	if got := reqContents(t, ob, nostr.Filter{Kinds: []int{protocol.KindStreamMessage}, Tags: nostr.TagMap{"h": {private}}}); len(got) != 1 || got[0] != "secret launch plan" {
		t.Fatalf("owner on node B reads %q", got)
	}
	sb := dialRaw(t, nodeB)
	sb.mustAuth(stranger.sk, nodeB)
	if got := reqContents(t, sb, messages); len(got) != 1 || got[0] != "public lunch plan" {
		t.Fatalf("non-member on node B reads %q", got)
	}
}

func TestOpenRejectsADatabaseThatIsNotAPostgresURL(t *testing.T) {
	_, err := relay.Open(relay.Config{DataDir: privateDir(t), Database: "mysql://x/y"})
	if err == nil {
		t.Fatal("accepted a mysql:// database")
	}
}
