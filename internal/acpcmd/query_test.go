package acpcmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/testbin"
)

// query runs a buzz-acp subcommand against the scripted test agent and returns its stdout.
func query(t *testing.T, args ...string) (string, error) {
	t.Helper()
	agent := filepath.Join(testbin.Dir(t, "internal/testagent"), "testagent")
	t.Setenv("BUZZ_PRIVATE_KEY", "") // none needed
	t.Setenv("TESTAGENT_NAME", "claude-agent-acp")
	t.Setenv("TESTAGENT_VERSION", "0.101.0")
	var out bytes.Buffer
	cmd := Command()
	cmd.SetArgs(append(args, "--agent-command", agent, "--agent-cwd", t.TempDir()))
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return out.String(), err
}

const modelsState = `{"configOptions":[
 {"id":"model","name":"Model","category":"model","type":"select","currentValue":"opus","options":[{"value":"opus","name":"Opus 4"},{"value":"sonnet","name":"Sonnet 4"}]},
 {"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"default","options":[{"value":"default","name":"Default"}]}],
 "models":{"currentModelId":"opus","availableModels":[{"modelId":"opus","name":"Opus 4"},{"modelId":"haiku","name":"Haiku"}]}}`

func TestModelsJSONHasAgentStableConfigOptionsAndUnstableModels(t *testing.T) {
	t.Setenv("TESTAGENT_SESSION_STATE", modelsState)
	out, err := query(t, "models", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Agent  struct{ Name, Version string }
		Stable struct {
			ConfigOptions []struct {
				ID           string `json:"id"`
				CurrentValue string `json:"currentValue"`
				Options      []struct{ Value string }
			} `json:"configOptions"`
		}
		Unstable *struct {
			CurrentModelID  string `json:"currentModelId"`
			AvailableModels []struct {
				ModelID string `json:"modelId"`
			} `json:"availableModels"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if got.Agent.Name != "claude-agent-acp" || got.Agent.Version != "0.101.0" {
		t.Fatalf("agent %+v", got.Agent)
	}
	if len(got.Stable.ConfigOptions) != 1 || got.Stable.ConfigOptions[0].ID != "model" || got.Stable.ConfigOptions[0].CurrentValue != "opus" ||
		len(got.Stable.ConfigOptions[0].Options) != 2 || got.Stable.ConfigOptions[0].Options[1].Value != "sonnet" {
		t.Fatalf("stable (only the model category belongs there): %s", out)
	}
	if got.Unstable == nil || got.Unstable.CurrentModelID != "opus" || len(got.Unstable.AvailableModels) != 2 || got.Unstable.AvailableModels[1].ModelID != "haiku" {
		t.Fatalf("unstable: %s", out)
	}
}

func TestModelsTextListsBothAndSaysWhenThereIsNoChoice(t *testing.T) {
	t.Setenv("TESTAGENT_SESSION_STATE", modelsState)
	out, err := query(t, "models")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"agent: claude-agent-acp 0.101.0", `config option "model"`, "sonnet  Sonnet 4", "current opus", "haiku  Haiku"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Setenv("TESTAGENT_SESSION_STATE", "")
	out, err = query(t, "models", "--json")
	if err != nil || !strings.Contains(out, `"unstable": null`) || !strings.Contains(out, `"configOptions": []`) {
		t.Fatalf("agent without models: err %v\n%s", err, out)
	}
}

func TestAuthMethodsListsWhatInitializeAdvertises(t *testing.T) {
	t.Setenv("TESTAGENT_AUTH_METHODS", `[{"id":"openai-api-key","name":"OpenAI key","type":"env_var","description":"uses OPENAI_API_KEY"},{"id":"chatgpt","name":"ChatGPT login"}]`)
	out, err := query(t, "auth-methods")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "openai-api-key  OpenAI key     (env_var)  uses OPENAI_API_KEY") || !strings.Contains(out, "chatgpt         ChatGPT login  (agent)") {
		t.Fatalf("output:\n%s", out)
	}
	out, err = query(t, "auth-methods", "--json")
	if err != nil || !strings.Contains(out, `"id": "chatgpt"`) {
		t.Fatalf("json: err %v\n%s", err, out)
	}
}

func TestAuthenticateSendsTheMethodAndNeedsOne(t *testing.T) {
	record := filepath.Join(t.TempDir(), "rec.jsonl")
	t.Setenv("TESTAGENT_RECORD", record)
	out, err := query(t, "authenticate", "--method-id", "chatgpt")
	if err != nil || !strings.Contains(out, "with chatgpt") {
		t.Fatalf("err %v out %q", err, out)
	}
	rec, _ := os.ReadFile(record)
	if !strings.Contains(string(rec), `"method":"authenticate","params":{"methodId":"chatgpt"}`) {
		t.Fatalf("the agent did not receive authenticate {methodId: chatgpt}:\n%s", rec)
	}
	if _, err := query(t, "authenticate"); err == nil || !strings.Contains(err.Error(), "--method-id is required") {
		t.Fatalf("without --method-id: %v", err)
	}
}
