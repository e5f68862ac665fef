// Package retry gets through the writes a consumer must complete before it
// commits offsets (findings to ClickHouse, quarantine and rerouted records
// to the broker): it retries them with backoff, and on shutdown it still
// tries for a bounded time, so a clean stop leaves nothing to replay.
package retry

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Backoff bounds between attempts.
const (
	FirstBackoff = 100 * time.Millisecond
	MaxBackoff   = 5 * time.Second
	// ShutdownGrace is how long writes still try once ctx is done.
	ShutdownGrace = 10 * time.Second
)

// FlushContext returns the context flush writes run under and the channel
// that ends their retrying. While ctx is live the writes are not cut by
// it (a half-written batch would only be replayed) and retrying ends when
// ctx ends; once ctx is done they get ShutdownGrace. Call cancel when the
// flush is over.
func FlushContext(ctx context.Context) (wctx context.Context, giveUp <-chan struct{}, cancel context.CancelFunc) {
	wctx, giveUp, cancel = context.WithoutCancel(ctx), ctx.Done(), func() {}
	if ctx.Err() != nil {
		wctx, cancel = context.WithTimeout(wctx, ShutdownGrace)
		giveUp = wctx.Done()
	}
	return wctx, giveUp, cancel
}

// Until calls fn until it returns nil, waiting FirstBackoff, doubling up to
// MaxBackoff, between attempts and logging each failure as "<what>
// failed". When giveUp closes it returns fn's last error, wrapped with
// what; the caller then leaves its offsets uncommitted.
func Until(giveUp <-chan struct{}, log *slog.Logger, what string, fn func() error) error {
	for backoff := FirstBackoff; ; backoff = min(2*backoff, MaxBackoff) {
		err := fn()
		if err == nil {
			return nil
		}
		log.Warn(what+" failed; retrying (offsets stay uncommitted)", "err", err, "backoff", backoff)
		select {
		case <-giveUp:
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(backoff):
		}
	}
}
