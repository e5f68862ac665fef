// Package retry is the one backoff loop of the pipeline. A consumer retries
// the writes it must complete before it commits offsets (findings to
// ClickHouse, quarantine and rerouted records to the broker), a group
// member retries restoring newly assigned partitions and waits out a
// pending transaction's offsets, and a process waits for ClickHouse: all
// with Do, each with its own Backoff. On shutdown a flush still tries for
// a bounded time (FlushContext), so a clean stop leaves nothing to replay.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Backoff is the wait between attempts: First after the first failure,
// doubled after each further one up to Max.
type Backoff struct {
	First, Max time.Duration
}

// Writes is the backoff of a flush's writes (Until): a write that fails
// is retried soon, and a server that stays away is asked every few
// seconds.
var Writes = Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}

// ShutdownGrace is how long writes still try once ctx is done.
const ShutdownGrace = 10 * time.Second

// shutdownGrace is ShutdownGrace; tests shorten it.
var shutdownGrace = ShutdownGrace

// permanent wraps an error that ends the retrying at once.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent marks err, returned by the fn of Do, as one that no retry
// can cure: Do returns err at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// Do calls fn until it returns nil, and returns nil; or until it returns
// an error marked Permanent, or giveUp closes while it waits to try again,
// and returns fn's last error (unwrapped from Permanent). After each
// failure it calls failed, when not nil, with the error and the wait
// before the next attempt (to log it); the waits follow b.
func Do(giveUp <-chan struct{}, b Backoff, fn func() error, failed func(err error, wait time.Duration)) error {
	for wait := b.First; ; wait = min(2*wait, b.Max) {
		err := fn()
		if err == nil {
			return nil
		}
		if p, ok := errors.AsType[*permanent](err); ok {
			return p.err
		}
		if failed != nil {
			failed(err, wait)
		}
		select {
		case <-giveUp:
			return err
		case <-time.After(wait):
		}
	}
}

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

// Until calls fn until it returns nil, with the Writes backoff, logging
// each failure as "<what> failed". When giveUp closes it returns fn's
// last error, wrapped with what; the caller then leaves its offsets
// uncommitted.
func Until(giveUp <-chan struct{}, log *slog.Logger, what string, fn func() error) error {
	err := Do(giveUp, Writes, fn, func(err error, wait time.Duration) {
		log.Warn(what+" failed; retrying (offsets stay uncommitted)", "err", err, "backoff", wait)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

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
