package harness

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

const (
	ownerPK = "1111111111111111111111111111111111111111111111111111111111111111"
	agentPK = "2222222222222222222222222222222222222222222222222222222222222222"
	otherPK = "3333333333333333333333333333333333333333333333333333333333333333"
)

func TestParseOwnerCommandAcceptsBareAndMentionForms(t *testing.T) {
	for content, want := range map[string]string{
		"!cancel":                CmdCancel,
		"  !rotate  ":            CmdRotate,
		"@Agent !rotate":         CmdRotate,
		"@Agent Smith !cancel":   CmdCancel,
		"!shutdown @Agent":       CmdShutdown,
		"nostr:npub1xyz !cancel": CmdCancel,
		"please !rotate":         "",
		"!rotate now":            "",
		"@Agent!rotate":          "",
		"hello @Agent":           "",
	} {
		e := &nostr.Event{Kind: 9, PubKey: ownerPK, Content: content, Tags: nostr.Tags{{"p", agentPK}}}
		if got, ok := ParseOwnerCommand(e, ownerPK, agentPK); got.Name != want || ok != (want != "") {
			t.Errorf("%q: got %q (%v) want %q", content, got.Name, ok, want)
		}
	}
}

func TestParseOwnerCommandIgnoresNonOwnersAndUnmentioned(t *testing.T) {
	e := &nostr.Event{Kind: 9, PubKey: otherPK, Content: "!rotate", Tags: nostr.Tags{{"p", agentPK}}}
	if _, ok := ParseOwnerCommand(e, ownerPK, agentPK); ok {
		t.Error("non-owner command recognised")
	}
	e = &nostr.Event{Kind: 9, PubKey: ownerPK, Content: "!rotate"}
	if _, ok := ParseOwnerCommand(e, ownerPK, agentPK); ok {
		t.Error("command without a mention of the agent recognised")
	}
	e = &nostr.Event{Kind: 40002, PubKey: ownerPK, Content: "!rotate", Tags: nostr.Tags{{"p", agentPK}}}
	if _, ok := ParseOwnerCommand(e, ownerPK, agentPK); ok {
		t.Error("non-kind-9 command recognised")
	}
}

func TestGateModes(t *testing.T) {
	allow := map[string]bool{otherPK: true}
	cases := []struct {
		mode   RespondTo
		author string
		typ    protocol.ChannelType
		want   bool
	}{
		{RespondOwnerOnly, ownerPK, "stream", true},
		{RespondOwnerOnly, otherPK, "stream", false},
		{RespondAllowlist, otherPK, "stream", true},
		{RespondAllowlist, agentPK, "stream", false},
		{RespondAllowlist, ownerPK, "private", true},
		{RespondAnyone, agentPK, "stream", true},
		{RespondAnyone, otherPK, "dm", false},
		{RespondAnyone, ownerPK, "dm", true},
		{RespondAnyone, otherPK, "unknown", false},
		{RespondNobody, ownerPK, "stream", false},
		{RespondNobody, ownerPK, "dm", false},
	}
	for _, c := range cases {
		g := Gate{Mode: c.mode, Owner: ownerPK, Allowlist: allow}
		if got := g.Allows(c.author, c.typ); got != c.want {
			t.Errorf("%s author=%s.. type=%s: got %v want %v", c.mode, c.author[:4], c.typ, got, c.want)
		}
	}
}

func TestGateOwnerOnlyWithoutOwnerDropsEverything(t *testing.T) {
	if (Gate{Mode: RespondOwnerOnly}).Allows(ownerPK, "stream") {
		t.Fatal("owner-only with no owner admitted an author")
	}
}

func TestDecideRoute(t *testing.T) {
	cases := []struct {
		name string
		a    AgentIdentity
		want Route
	}{
		{"spec capability wins", AgentIdentity{Name: "buzz-agent", SpecSystemPrompt: true}, RouteSpecSystemPrompt},
		{"claude new package", AgentIdentity{Name: "@agentclientprotocol/claude-agent-acp", Version: "0.101.0"}, RouteClaudeMeta},
		{"zed claude-agent-acp", AgentIdentity{Name: "@zed-industries/claude-agent-acp", Version: "0.23.1"}, RouteClaudeMeta},
		{"zed claude-code-acp at floor", AgentIdentity{Name: "@zed-industries/claude-code-acp", Version: "0.6.0"}, RouteClaudeMeta},
		{"claude below floor", AgentIdentity{Name: "@zed-industries/claude-code-acp", Version: "0.5.9"}, RouteUserMessage},
		{"claude without version", AgentIdentity{Name: "@agentclientprotocol/claude-agent-acp"}, RouteUserMessage},
		{"claude unparseable version", AgentIdentity{Name: "@agentclientprotocol/claude-agent-acp", Version: "latest"}, RouteUserMessage},
		{"goose before probe", AgentIdentity{Name: "goose"}, RouteGoose},
		{"goose probe ok", AgentIdentity{Name: "goose", GooseProbe: ProbeSupported}, RouteGoose},
		{"goose probe failed", AgentIdentity{Name: "goose", GooseProbe: ProbeUnsupported}, RouteUserMessage},
		{"codex", AgentIdentity{Name: "codex-acp", Version: "0.16.0"}, RouteUserMessage},
	}
	for _, c := range cases {
		if got := DecideRoute(c.a); got != c.want {
			t.Errorf("%s: got %s want %s", c.name, got, c.want)
		}
	}
}
