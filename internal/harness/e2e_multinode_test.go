package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// proc is a started binary whose output is kept for waits and failure messages.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *testbin.Output
	exited chan error
}

func startProc(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &testbin.Output{}, exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// kill SIGKILLs the process group; safe to call twice.
func (p *proc) kill() {
	if p.exited == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	p.exited = nil
}

// waitFor polls the output until re matches and returns its first submatch (or the match).
func (p *proc) waitFor(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	testwait.Eventually(t, 30*time.Second, func() bool {
		if m = re.FindStringSubmatch(p.out.String()); m != nil {
			return true
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("%s exited (%v) before %q; output:\n%s", p.name, err, re, p.out.String())
		default:
		}
		return false
	}, fmt.Sprintf("%s to print %q", p.name, re))
	return m[len(m)-1]
}

var listening = regexp.MustCompile(`listening on (ws://[0-9.:]+) \(data .*relay pubkey ([0-9a-f]{64})\)`)

func TestMultiNodeMentionIsAnsweredOnceAfterFirstNodeIsKilled(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	bin := testbin.Dir(t, "cmd/buzz", "cmd/buzz-acp", "cmd/buzz-relay", "internal/testagent")
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	nodeA := startProc(t, "node A", nil, filepath.Join(bin, "buzz-relay"), "--addr", "127.0.0.1:0", "--data-dir", dirA, "--database", dbURL)
	nodeA.waitFor(t, listening)
	mA := listening.FindStringSubmatch(nodeA.out.String())
	key, err := os.ReadFile(filepath.Join(dirA, "relay.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, "relay.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	nodeB := startProc(t, "node B", nil, filepath.Join(bin, "buzz-relay"), "--addr", "127.0.0.1:0", "--data-dir", dirB, "--database", dbURL)
	nodeB.waitFor(t, listening)
	mB := listening.FindStringSubmatch(nodeB.out.String())
	urlA, urlB := mA[1], mB[1]
	if mA[2] != mB[2] {
		t.Fatalf("nodes sign as %s and %s; the copied relay.key must give one relay pubkey", mA[2], mB[2])
	}

	ownerSK, ownerPK := newKey(t)
	agentSK, agentPK := newKey(t)
	owner := client.NewBridge(urlB, ownerSK)
	ctx := context.Background()
	channel := uuid.NewString()
	for _, ev := range []*nostr.Event{
		{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{{"h", channel}, {"name", "general"}, {"visibility", protocol.VisibilityOpen}, {"channel_type", protocol.TypeStream}}},
		{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", channel}, {"p", agentPK}, {"role", "bot"}}},
	} {
		if res, err := owner.Publish(ctx, ev); err != nil || !res.Accepted {
			t.Fatalf("setup kind %d: %+v %v", ev.Kind, res, err)
		}
	}

	dir := t.TempDir()
	harness := startProc(t, "buzz-acp", []string{
		"BUZZ_PRIVATE_KEY=" + agentSK,
		"BUZZ_RELAY_URL=" + urlA + "," + urlB,
		"XDG_STATE_HOME=" + filepath.Join(dir, "xdg"),
		"TESTAGENT_RECORD=" + filepath.Join(dir, "record.jsonl"),
		"TESTAGENT_STATE_DIR=" + filepath.Join(dir, "agent-state"),
	}, filepath.Join(bin, "buzz-acp"),
		"--agent-command", filepath.Join(bin, "testagent"),
		"--agent-owner", ownerPK,
		"--state-dir", filepath.Join(dir, "state"),
		"--agent-cwd", t.TempDir(),
		"--log-level", "debug")
	harness.waitFor(t, regexp.MustCompile(`buzz-acp ready`))

	// The owner's CLI talks to node B only; the harness is connected to node A.
	send := func(content string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "buzz"), "--relay", urlB, "messages", "send",
			"--channel", channel, "--content", content, "--mention", agentPK)
		cmd.Env = append(os.Environ(), "BUZZ_PRIVATE_KEY="+ownerSK)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("buzz messages send: %v\n%s", err, out)
		}
		var res struct {
			EventID string `json:"event_id"`
			ID      string `json:"id"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.EventID+res.ID == "" {
			t.Fatalf("buzz messages send printed %q (%v)", out, err)
		}
		return res.EventID + res.ID
	}
	replies := func(id string) []nostr.Event {
		t.Helper()
		evs, err := owner.Query(ctx, client.F(nostr.Filter{Kinds: []int{9}, Authors: []string{agentPK}, Tags: nostr.TagMap{"e": {id}}})...)
		if err != nil {
			t.Fatalf("query replies: %v", err)
		}
		return evs
	}
	waitReply := func(id string) {
		t.Helper()
		testwait.Eventually(t, 45*time.Second, func() bool { return len(replies(id)) > 0 }, "a reply to "+id)
	}

	waitReply(send("hello across nodes"))

	nodeA.kill()
	during := send("while node A is gone")
	waitReply(during)
	// A later mention answered means the harness has handled everything before it: a duplicate
	// answer to the earlier one would be there by now.
	waitReply(send("after failover"))
	if n := len(replies(during)); n != 1 {
		t.Fatalf("mention sent during failover answered %d times, want once", n)
	}
	if !strings.Contains(harness.out.String(), urlB) {
		t.Fatalf("buzz-acp never named node B; output:\n%s", harness.out.String())
	}
}
