package observer

import (
	"strings"
	"testing"
)

const (
	hexKey = "5c0c523f52a5b6fad39ed2403092df8cebc36318b39383bca6c00808626fab3a"
	nsec   = "nsec1tsx9y06j5km04h6wrfqrpykdjrh7rxzh8wfc8096cqyqsf3jhqxqk6lnpq"
)

func TestRedactRemovesSecrets(t *testing.T) {
	cases := []struct{ name, in, secret string }{
		{"nsec alone", "key is " + nsec + " ok", nsec},
		{"env assignment", "BUZZ_PRIVATE_KEY=" + hexKey, hexKey},
		{"legacy env name", "BUZZ_ACP_PRIVATE_KEY=" + hexKey + " goose", hexKey},
		{"env with nsec", "BUZZ_PRIVATE_KEY=" + nsec, nsec},
		{"json field", `{"private_key": "` + hexKey + `"}`, hexKey},
		{"acp env array", `{"env":[{"name":"BUZZ_PRIVATE_KEY","value":"` + hexKey + `"}]}`, hexKey},
		{"escaped acp line", `"line":"{\"env\":[{\"name\":\"BUZZ_PRIVATE_KEY\",\"value\":\"` + hexKey + `\"}]}"`, hexKey},
		{"uppercase hex", "NOSTR_SECRET_KEY=" + strings.ToUpper(hexKey), strings.ToUpper(hexKey)},
		{"api key", "ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijkl", "sk-ant-api03-abcdefghijkl"},
		{"api token json pair", `{"name":"BUZZ_API_TOKEN","value":"tok_123456789"}`, "tok_123456789"},
		{"second key in window", "PRIVATE_KEYS " + strings.Repeat("1", 64) + " " + hexKey, hexKey},
		{"password colon", "DB_PASSWORD: hunter2hunter2", "hunter2hunter2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := Redact(c.in)
			if strings.Contains(out, c.secret) || !strings.Contains(out, Redacted) {
				t.Fatalf("Redact(%q) = %q", c.in, out)
			}
		})
	}
}

func TestRedactKeepsOrdinaryTextAndEventIDs(t *testing.T) {
	for _, s := range []string{
		"hello world",
		`{"id":"` + hexKey + `","pubkey":"` + hexKey + `","kind":9}`,
		"the key to success is practice",
		"npub1tsx9y06j5km04h6wrfqrpykdjrh7rxzh8wfc8096cqyqsf3jhqxqk6lnpq",
		"BUZZ_RELAY_URL=ws://127.0.0.1:3000",
		"spent 1200 tokens; the monkey's pubkey is " + hexKey,
	} {
		if got := Redact(s); got != s {
			t.Errorf("Redact(%q) = %q, want unchanged", s, got)
		}
	}
}

func TestRedactKeepsSecretNames(t *testing.T) {
	if got := Redact("BUZZ_PRIVATE_KEY=" + hexKey); got != "BUZZ_PRIVATE_KEY="+Redacted {
		t.Fatalf("got %q", got)
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("BUZZ_PRIVATE_KEY=" + hexKey)
	f.Add(`{"name":"OPENAI_API_KEY","value":"sk-abc"}`)
	f.Add(nsec)
	f.Add("plain text")
	f.Add("SECRET=[REDACTED] SECRET: x")
	f.Add("SECRET " + hexKey + " " + hexKey)
	f.Add("privkey " + hexKey)
	f.Add("Nsec: " + hexKey)
	f.Fuzz(func(t *testing.T, s string) {
		out := Redact(s)
		if !maybeSecret(s) && redactAll(s) != s {
			t.Fatalf("the pre-check skipped a line the patterns change: %q", s)
		}
		if again := Redact(out); again != out {
			t.Fatalf("not idempotent:\n in  %q\n out %q\n out2 %q", s, out, again)
		}
		if strings.Contains(s, nsec) && strings.Contains(out, nsec) {
			t.Fatalf("nsec survived: %q", out)
		}
	})
}

func BenchmarkRedactPlainLine(b *testing.B) {
	s := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello there"}}}}`
	for b.Loop() {
		_ = Redact(s)
	}
}

// A prompt line names pubkeys and event ids but no secret: it must not pay for the regexps.
func BenchmarkRedactPromptLine(b *testing.B) {
	s := `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"[Buzz] New message in #general\nEvent ID: ` + hexKey + `\nFrom: alice (pubkey ` + hexKey + `)\n\nhello, can you look at the build?"}]}}`
	for b.Loop() {
		_ = Redact(s)
	}
}
