// Package retry gets through the writes a consumer must complete before it
// commits offsets (findings to ClickHouse, quarantine and rerouted records
// to the broker): it retries them with backoff, and on shutdown it still
// tries for a bounded time, so a clean stop leaves nothing to replay.
package retry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Backoff bounds between attempts.
const (
	FirstBackoff = 100 * time.Millisecond
	MaxBackoff   = 5 * time.Second
	// ShutdownGrace is how long writes still try once ctx is done.
	ShutdownGrace = 10 * time.Second
)

// shutdownGrace is ShutdownGrace; tests shorten it.
var shutdownGrace = ShutdownGrace

// FlushContext returns the context flush writes run under and the channel
// that ends their retrying. While ctx is live the writes are not cut by
// it (a half-written batch would only be replayed) and retrying goes on;
// once ctx is done, whether before the flush or during it, they get
// shutdownGrace more. Call cancel when the flush is over.
func FlushContext(ctx context.Context) (wctx context.Context, giveUp <-chan struct{}, cancel context.CancelFunc) {
	wctx, cancelW := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex // mu protects timer and over
		timer *time.Timer
		over  bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !over {
			timer = time.AfterFunc(shutdownGrace, cancelW)
		}
	})
	return wctx, wctx.Done(), func() {
		stop()
		mu.Lock()
		over = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancelW()
	}
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

// RestoreTimeout is how long a group member retries restoring newly
// assigned partitions before it leaves the group: the client's default
// rebalance timeout, past which the group would drop it anyway.
const RestoreTimeout = time.Minute

// Restore calls restore, which must rebuild its state from scratch each
// time (a restore reads the broker anew), until it succeeds, ctx ends or
// timeout passes, logging each failure as "<what> failed". A broker
// restarting under a rebalance fails a restore once or twice; without its
// state the member could not go on, so it would otherwise leave the group.
func Restore(ctx context.Context, timeout time.Duration, log *slog.Logger, what string, restore func() error) error {
	giveUp, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return Until(giveUp.Done(), log, what, restore)
}
