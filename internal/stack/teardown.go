package stack

import (
	"context"
	"fmt"
	"io"
)

// teardown is what a start has brought up so far, undone last first, once. Once the stack is
// up, each part undone says so.
type teardown struct {
	out   io.Writer
	up    bool // the banner is out: the data dir is a real one, whatever happens later
	steps []teardownStep
}

type teardownStep struct {
	undo func()
	said string // printed once undone, if the stack was up ("" = nothing)
}

func (t *teardown) add(undo func(), said string) {
	t.steps = append(t.steps, teardownStep{undo: undo, said: said})
}

func (t *teardown) unwind() {
	for i := len(t.steps) - 1; i >= 0; i-- {
		t.steps[i].undo()
		if t.up && t.steps[i].said != "" {
			fmt.Fprintln(t.out, t.steps[i].said)
		}
	}
	t.steps = nil
}

// task is a part running on a goroutine of its own until stopped.
type task struct {
	cancel context.CancelFunc
	done   chan struct{} // closed once run has returned
	err    error
}

// goTask runs run under a context of its own, derived from ctx.
func goTask(ctx context.Context, run func(context.Context) error) *task {
	ctx, cancel := context.WithCancel(ctx)
	t := &task{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		t.err = run(ctx)
	}()
	return t
}

// stop ends the task and returns its error once it has returned; stopping it again is harmless.
func (t *task) stop() error {
	t.cancel()
	<-t.done
	return t.err
}
