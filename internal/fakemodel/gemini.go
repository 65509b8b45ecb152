package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func geminiError(rep Reply) any {
	status := "INTERNAL"
	switch rep.Status {
	case http.StatusUnauthorized:
		status = "UNAUTHENTICATED"
	case http.StatusTooManyRequests:
		status = "RESOURCE_EXHAUSTED"
	}
	return map[string]any{"error": map[string]any{"code": rep.Status, "message": rep.ErrorMessage, "status": status}}
}

// NewGemini starts a fake Gemini API (generativelanguage v1beta, as gemini-cli speaks it):
// POST /v1beta/models/{model}:streamGenerateContent (SSE), :generateContent, and :countTokens,
// which answers a fixed count without asking the script. A model's text and function calls
// come back as parts of one candidate.
func NewGemini(t testing.TB, script Script) *Server {
	return newServer(t, script, "", map[string]handler{"POST /v1beta/models/{call}": (*Server).serveGemini})
}

func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	switch method {
	case "countTokens":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"totalTokens":100}`))
		return
	case "generateContent", "streamGenerateContent":
	default:
		http.Error(w, "unknown method "+method, http.StatusNotFound)
		return
	}
	var mismatch string
	_, _, rep, ok := s.receive(w, r, func(path string, body []byte) (Request, error) {
		req, err := ParseGeminiRequest(path, body)
		req.Model, req.Stream = model, method == "streamGenerateContent"
		mismatch = unansweredCalls(body)
		return req, err
	}, geminiError)
	if !ok {
		return
	}
	if mismatch != "" {
		// The real API refuses such a history (it is recorded all the same, for tests to see).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"code": http.StatusBadRequest, "message": mismatch, "status": "INVALID_ARGUMENT"}})
		return
	}
	var parts []map[string]any
	for _, c := range rep.Calls {
		args := json.RawMessage(c.Args)
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		parts = append(parts, map[string]any{"functionCall": map[string]any{"id": c.ID, "name": c.Name, "args": args}})
	}
	chunk := func(parts []map[string]any, done bool) map[string]any {
		cand := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": parts}}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": model}
		if done {
			cand["finishReason"] = "STOP"
			out["usageMetadata"] = map[string]any{"promptTokenCount": rep.InputTokens,
				"candidatesTokenCount": rep.OutputTokens, "totalTokenCount": rep.InputTokens + rep.OutputTokens}
		}
		return out
	}
	if method == "generateContent" {
		if len(rep.Text) > 0 {
			parts = append([]map[string]any{{"text": strings.Join(rep.Text, "")}}, parts...)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(chunk(parts, true))
		return
	}
	send := sse(w)
	text := rep.Text
	if !rep.Hang && rep.StreamError == "" && !rep.Truncate && len(text) > 0 {
		// The last text piece rides with the finish reason, as real streams end.
		parts = append([]map[string]any{{"text": text[len(text)-1]}}, parts...)
		text = text[:len(text)-1]
	}
	for _, txt := range text {
		send("", chunk([]map[string]any{{"text": txt}}, false))
	}
	if rep.Hang {
		<-r.Context().Done()
		return
	}
	if rep.StreamError != "" {
		send("", map[string]any{"error": map[string]any{"code": 503, "message": rep.StreamError, "status": "UNAVAILABLE"}})
		return
	}
	if rep.Truncate {
		return
	}
	// The last chunk carries the calls (if any), the finish reason and the usage.
	if parts == nil {
		parts = []map[string]any{} // gemini-cli reads parts' length: never null
	}
	send("", chunk(parts, true))
}

// ParseGeminiRequest decodes a generateContent request body: "model" turns become assistant
// messages, functionResponse parts "tool" messages of their own (ToolCallID is the call's id,
// or its name when the client sent none), systemInstruction Request.System.
func ParseGeminiRequest(path string, body []byte) (Request, error) {
	type part struct {
		Text         string `json:"text"`
		Thought      bool   `json:"thought"`
		FunctionCall *struct {
			Name string `json:"name"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			ID       string          `json:"id"`
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
	}
	var in struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []part `json:"parts"`
		} `json:"contents"`
		SystemInstruction *struct {
			Parts []part `json:"parts"`
		} `json:"systemInstruction"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("generateContent request is not JSON: %w", err)
	}
	req := Request{Path: path, Body: body}
	if in.SystemInstruction != nil {
		var texts []string
		for _, p := range in.SystemInstruction.Parts {
			texts = append(texts, p.Text)
		}
		req.System = strings.Join(texts, "\n")
	}
	for _, c := range in.Contents {
		role := c.Role
		if role == "model" {
			role = "assistant"
		}
		msg := Msg{Role: role}
		var texts []string
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				id := p.FunctionResponse.ID
				if id == "" {
					id = p.FunctionResponse.Name
				}
				req.Messages = append(req.Messages, Msg{Role: "tool", ToolCallID: id, Text: string(p.FunctionResponse.Response)})
			case p.FunctionCall != nil:
				msg.ToolCalls = append(msg.ToolCalls, p.FunctionCall.Name)
			case p.Text != "" && !p.Thought:
				texts = append(texts, p.Text)
			}
		}
		msg.Text = strings.Join(texts, "\n")
		if msg.Text != "" || len(msg.ToolCalls) > 0 {
			req.Messages = append(req.Messages, msg)
		}
	}
	for _, t := range in.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, f.Name)
		}
	}
	return req, nil
}

// GeminiCallMismatch is the real API's message for a history whose function-response turn does
// not answer the function-call turn before it one for one.
const GeminiCallMismatch = "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."

// unansweredCalls returns GeminiCallMismatch if a content of functionResponse parts follows a
// content with a different number of functionCall parts, as the real API checks; else "".
func unansweredCalls(body []byte) string {
	var in struct {
		Contents []struct {
			Parts []struct {
				FunctionCall     json.RawMessage `json:"functionCall"`
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if json.Unmarshal(body, &in) != nil {
		return ""
	}
	calls := 0
	for _, c := range in.Contents {
		n, responses := 0, 0
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				n++
			}
			if p.FunctionResponse != nil {
				responses++
			}
		}
		if responses > 0 && responses != calls {
			return GeminiCallMismatch
		}
		calls = n
	}
	return ""
}
