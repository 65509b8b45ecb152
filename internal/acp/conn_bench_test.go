package acp

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// BenchmarkConnWrite is the cost of putting one session/prompt line on the wire, recorded as the
// harness records it: into a writer that costs nothing (the Conn's own overhead), into a real
// pipe drained by a reader (an agent's stdin), and from many goroutines at once (a pool's turns
// and permission answers sharing one agent).
func BenchmarkConnWrite(b *testing.B) {
	line, err := json.Marshal(outRequest{JSONRPC: "2.0", ID: new(int64), Method: "session/prompt",
		Params: PromptParams{SessionID: "sess_1", Prompt: []ContentBlock{TextBlock(strings.Repeat("a mention in a channel ", 100))}}})
	if err != nil {
		b.Fatal(err)
	}
	record := func(Line) {}
	bench := func(b *testing.B, w io.Writer, parallel bool) {
		pr, _ := io.Pipe() // nothing is ever read from the agent
		c := NewConn(pr, w, nil, record)
		defer c.Close()
		ctx := context.Background()
		b.SetBytes(int64(len(line) + 1))
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.writeLine(ctx, line); err != nil {
						b.Error(err)
						return
					}
				}
			})
			return
		}
		for b.Loop() {
			if err := c.writeLine(ctx, line); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("discard", func(b *testing.B) { bench(b, io.Discard, false) })
	b.Run("discard-parallel", func(b *testing.B) { bench(b, io.Discard, true) })
	b.Run("pipe", func(b *testing.B) {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		drained := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, r); close(drained) }()
		bench(b, w, false) // Close closes w, which ends the drain
		<-drained
		r.Close()
	})
}
