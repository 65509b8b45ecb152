package acp

import (
	"encoding/json"
	"testing"
)

func TestPromptCapabilityIsTrueOnlyForTrue(t *testing.T) {
	r, err := parseInitializeResult(json.RawMessage(`{"agentCapabilities":{"promptCapabilities":{"image":true,"audio":"yes","embeddedContext":false}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !r.PromptCapability("image") || r.PromptCapability("audio") || r.PromptCapability("embeddedContext") || r.PromptCapability("video") {
		t.Fatalf("capabilities misread: %v", r.PromptCapabilities)
	}
}

func TestImageBlockIsACPImageContent(t *testing.T) {
	b, err := json.Marshal(ImageBlock("image/png", []byte{0x89, 'P', 'N', 'G'}))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"type":"image","data":"iVBORw==","mimeType":"image/png"}` {
		t.Fatalf("got %s", b)
	}
	var back ContentBlock
	if err := json.Unmarshal(b, &back); err != nil || back.Type != "image" || back.Data != "iVBORw==" || back.MimeType != "image/png" {
		t.Fatalf("read back %+v %v", back, err)
	}
}

func TestTextBlockAlwaysCarriesItsText(t *testing.T) {
	for text, want := range map[string]string{"": `{"type":"text","text":""}`, "hi": `{"type":"text","text":"hi"}`} {
		if b, _ := json.Marshal(TextBlock(text)); string(b) != want {
			t.Errorf("got %s, want %s", b, want)
		}
	}
}
