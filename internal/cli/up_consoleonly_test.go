package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/cli"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testwait"
)

func TestUpConsoleOnlyServesARemoteConsoleForTheAgent(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	agentPK, _ := protocol.PublicKey(nostr.GeneratePrivateKey())
	var out, errb lockedBuffer
	cmd := cli.NewRootCommand(cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Env: func(k string) string {
			return map[string]string{"BUZZ_RELAY_URL": s.URL, "BUZZ_PRIVATE_KEY": ownerSK, "BUZZ_UP_CONSOLE_ONLY": "1"}[k]
		}})
	cmd.SetArgs([]string{"up", "--agent", protocol.Npub(agentPK), "--console-addr", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- cmd.ExecuteContext(ctx) }()
	line := regexp.MustCompile(`console  (http://\S+)`)
	var page string
	testwait.Eventually(t, 30*time.Second, func() bool {
		if m := line.FindStringSubmatch(out.String()); m != nil {
			page = m[1]
		}
		return page != ""
	}, "the console URL on stdout")
	u, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+u.Host+"/api/state", nil)
	req.Header.Set("X-Buzz-Token", u.Query().Get("token"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Mode     string `json:"mode"`
		Controls bool   `json:"controls"`
		Remote   bool   `json:"remote"`
		Owner    struct {
			Pubkey string `json:"pubkey"`
		} `json:"owner"`
		Agent struct {
			Pubkey string `json:"pubkey"`
		} `json:"agent"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	ownerPK, _ := protocol.PublicKey(ownerSK)
	if err != nil || st.Mode != "full" || !st.Controls || !st.Remote || st.Owner.Pubkey != ownerPK || st.Agent.Pubkey != agentPK {
		t.Fatalf("state %+v (err %v), want the full console, remote, with controls, as the owner for the agent", st, err)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("buzz up --console-only: %v (stderr %s)", err, errb.String())
	}
	if strings.Contains(out.String(), "starting the relay") {
		t.Errorf("console-only started a relay:\n%s", out.String())
	}
}

func TestUpConsoleOnlyFlagsAreUsageErrorsWhenIncomplete(t *testing.T) {
	t.Parallel()
	agentPK, _ := protocol.PublicKey(nostr.GeneratePrivateKey())
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no agent", []string{"up", "--console-only"}, "--agent"},
		{"bad agent", []string{"up", "--console-only", "--agent", "nope"}, "--agent"},
		{"agent without console-only", []string{"up", "--agent", agentPK}, "--console-only"},
	} {
		var out, errb bytes.Buffer
		code := cli.Main(c.args, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
			Env: func(k string) string {
				return map[string]string{"BUZZ_RELAY_URL": "http://127.0.0.1:1", "BUZZ_PRIVATE_KEY": nostr.GeneratePrivateKey()}[k]
			}})
		if code != cli.ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d stderr %s", c.name, code, errb.String())
		}
	}
}
