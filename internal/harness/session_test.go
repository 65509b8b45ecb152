package harness

import (
	"testing"
)

func TestSessionParamsCarryChannelIdentityTitleAndFreshInOneMeta(t *testing.T) {
	o := &sessionOpener{cfg: &Config{AgentCwd: "/work", SessionTitle: "helper"}}
	ch := &channel{ID: "c1", Name: "general", Type: "stream"}
	p := o.params(sessionSpec{channel: ch, scope: scopeKey{Channel: "c1", Root: "r1"}, route: RouteUserMessage, system: "ignored here", fresh: true})
	if p.Cwd != "/work" || p.SystemPrompt != nil {
		t.Fatalf("cwd %q, systemPrompt %v", p.Cwd, p.SystemPrompt)
	}
	want := map[string]any{"sessionTitle": "helper · #general", "channelId": "c1", "channelType": "stream", "freshSession": true}
	if len(p.Meta) != len(want)+1 {
		t.Fatalf("meta %v, want %v and buzz", p.Meta, want)
	}
	if b, _ := p.Meta["buzz"].(map[string]any); b["conversationId"] != "buzz:c1:r1" {
		t.Fatalf("meta.buzz %v, want conversationId buzz:c1:r1", p.Meta["buzz"])
	}
	for k, v := range want {
		if p.Meta[k] != v {
			t.Fatalf("meta[%s] = %v, want %v", k, p.Meta[k], v)
		}
	}
}

func TestSessionParamsPutStandingContextWhereTheRouteCarriesIt(t *testing.T) {
	o := &sessionOpener{cfg: &Config{AgentCwd: "/work"}}
	spec := o.params(sessionSpec{route: RouteSpecSystemPrompt, system: "[Base]\nbe kind"})
	if spec.SystemPrompt == nil || spec.SystemPrompt.Mode != "append" || spec.SystemPrompt.Content[0].Text != "[Base]\nbe kind" {
		t.Fatalf("spec route: systemPrompt %+v", spec.SystemPrompt)
	}
	claude := o.params(sessionSpec{route: RouteClaudeMeta, system: "[Base]\nbe kind"})
	if sp, _ := claude.Meta["systemPrompt"].(map[string]any); claude.SystemPrompt != nil || sp["append"] != "[Base]\nbe kind" {
		t.Fatalf("claude route: systemPrompt %+v, meta %v", claude.SystemPrompt, claude.Meta)
	}
	for _, r := range []Route{RouteSpecSystemPrompt, RouteClaudeMeta} {
		if p := o.params(sessionSpec{route: r}); p.SystemPrompt != nil || len(p.Meta) != 0 {
			t.Fatalf("%s with no standing text and no channel: %+v", r, p)
		}
	}
}
