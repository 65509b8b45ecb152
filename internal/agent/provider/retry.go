package provider

import (
	"context"
	"errors"
	"time"
)

// Retrying wraps a Provider and retries retryable failures (HTTP 429 and
// 5xx before any text was streamed) with exponential backoff.
type Retrying struct {
	Provider
	// Attempts is the total number of tries; values < 1 mean 4.
	Attempts int
	// BaseDelay is the first backoff; it doubles per retry, capped at
	// MaxDelay. Zero values mean 1 s and 30 s.
	BaseDelay, MaxDelay time.Duration
	// Sleep waits for d or until ctx ends; nil means a real timer. Tests
	// inject their own so they never sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry, if set, is told about each retry (for logs).
	OnRetry func(attempt int, delay time.Duration, err error)
}

// Complete implements Provider.
func (r *Retrying) Complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	attempts := r.Attempts
	if attempts < 1 {
		attempts = 4
	}
	base, maxDelay := r.BaseDelay, r.MaxDelay
	if base <= 0 {
		base = time.Second
	}
	if maxDelay <= 0 {
		maxDelay = 30 * time.Second
	}
	sleep := r.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	delay := base
	for attempt := 1; ; attempt++ {
		resp, err := r.Provider.Complete(ctx, req, onText)
		if err == nil || attempt >= attempts || !IsRetryable(err) || ctx.Err() != nil {
			return resp, err
		}
		wait := delay
		if ra := retryAfter(err); ra > wait {
			wait = ra
		}
		wait = min(wait, maxDelay)
		if r.OnRetry != nil {
			r.OnRetry(attempt, wait, err)
		}
		if err := sleep(ctx, wait); err != nil {
			return Response{}, err
		}
		delay = min(delay*2, maxDelay)
	}
}

func retryAfter(err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
