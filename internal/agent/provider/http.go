package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// userAgent names us to model servers and proxies.
const userAgent = "buzz-agent"

// endpoint joins an API base URL and a path as the official SDKs did, so
// OPENAI_BASE_URL and ANTHROPIC_BASE_URL keep meaning what users wrote: the
// base's path is a directory ("http://h:11434/v1" + "chat/completions" is
// "http://h:11434/v1/chat/completions") and nothing is added to it.
func endpoint(base, path string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("bad base URL %q: %w", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("bad base URL %q: want http:// or https://", base)
	}
	return u.JoinPath(path).String(), nil
}

// post sends body as JSON and returns the response to a 2xx answer; any
// other status becomes an *APIError with the server's own message.
func post(ctx context.Context, client *http.Client, name, url string, header http.Header, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", userAgent)
	c := http.Client{}
	if client != nil {
		c = *client
	}
	c.CheckRedirect = sameOrigin(c.CheckRedirect)
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return nil, &APIError{
		Provider:   name,
		Status:     resp.StatusCode,
		Message:    errorMessage(raw),
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
	}
}

// sameOrigin refuses a redirect to another scheme, host or port before next
// (or the default limit of 10) is asked: net/http would carry our API key
// headers along, and only Authorization is dropped on a change of host.
func sameOrigin(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if from := via[0].URL; req.URL.Scheme != from.Scheme || req.URL.Host != from.Host {
			return fmt.Errorf("refusing a redirect from %s to %s", from.Host, req.URL.Redacted())
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// errorMessage digs the human message out of an error body: OpenAI's and
// Anthropic's {"error":{"message":…}}, Ollama's {"error":"…"}, or a plain
// {"message":…} / {"detail":…}; anything else is shown as text, on one line.
func errorMessage(raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &body) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(body.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(body.Error, &s) == nil && s != "":
			return s
		case body.Message != "":
			return body.Message
		case json.Unmarshal(body.Detail, &s) == nil && s != "":
			return s
		}
	}
	msg := strings.Join(strings.Fields(string(raw)), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

// streamError is the APIError for an error event in a stream; raw is the
// event's "error" value (an object with a message, or a string).
func streamError(name string, raw json.RawMessage, status int, streamed bool) *APIError {
	msg := ""
	if wrapped, err := json.Marshal(map[string]json.RawMessage{"error": raw}); err == nil && len(raw) > 0 {
		msg = errorMessage(wrapped)
	}
	return &APIError{Provider: name, Status: status, Message: msg, InStream: true, Streamed: streamed}
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// readErr is what a failed read of a response stream returns: the context's
// error when the caller cancelled (the transport's own wording varies), else
// the read error, named for the provider.
func readErr(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%s: reading the response stream: %w", name, err)
}

// decodeEvent decodes one event's JSON data into v. A field of an unexpected
// type (servers that only mimic an API differ in details) leaves that field
// zero rather than failing the stream; data that is not JSON is an error.
func decodeEvent(data string, v any) error {
	err := json.Unmarshal([]byte(data), v)
	var typeErr *json.UnmarshalTypeError
	if err == nil || errors.As(err, &typeErr) {
		return nil
	}
	return fmt.Errorf("a stream event is not JSON (%v): %.200q", err, data)
}
