package retry

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

func TestUntilRetriesThenSucceeds(t *testing.T) {
	calls := 0
	err := Until(nil, slog.New(slog.DiscardHandler), "write", func() error {
		if calls++; calls < 3 {
			return errors.New("down")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Until = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilGivesUp(t *testing.T) {
	giveUp := make(chan struct{})
	close(giveUp)
	down := errors.New("down")
	err := Until(giveUp, slog.New(slog.DiscardHandler), "write findings", func() error { return down })
	if !errors.Is(err, down) || err.Error() != "write findings: down" {
		t.Fatalf("Until = %v, want the last error wrapped", err)
	}
}

// TestFlushContext: a flush gets the shutdown grace whether the shutdown
// came before it or during it (a joiner stopped while it retried a write
// to a ClickHouse that was restarting gave up at once, although the next
// attempt would have succeeded), and the grace is bounded.
func TestFlushContext(t *testing.T) {
	defer func(g time.Duration) { shutdownGrace = g }(shutdownGrace)
	shutdownGrace = 200 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	wctx, giveUp, done := FlushContext(ctx)
	cancel()
	began := time.Now()
	select {
	case <-giveUp:
		t.Fatal("a flush under way gave up the moment its parent ended")
	case <-time.After(shutdownGrace / 2):
	}
	if wctx.Err() != nil {
		t.Fatal("a flush under way was cut by its parent ending")
	}
	<-giveUp // bounded by the grace
	if d := time.Since(began); d < shutdownGrace/2 || d > 10*shutdownGrace {
		t.Fatalf("gave up %v after the parent ended, want about %v", d, shutdownGrace)
	}
	done()

	wctx, giveUp, done = FlushContext(ctx) // shutdown before the flush
	if wctx.Err() != nil {
		t.Fatal("a shutdown flush got no grace")
	}
	<-giveUp
	done()

	// A flush whose parent ends while it retries: the attempt after the
	// shutdown still runs under a live context and succeeds within the
	// grace, and only done ends the flush's context.
	shutdownGrace = 10 * time.Second
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	wctx, giveUp, done = FlushContext(ctx)
	calls := 0
	err := Until(giveUp, slog.New(slog.DiscardHandler), "write", func() error {
		if wctx.Err() != nil {
			t.Fatalf("attempt %d ran under an ended context", calls+1)
		}
		if calls++; calls == 1 {
			cancel() // shutdown during the flush
			return errors.New("clickhouse restarting")
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Until = %v after %d attempts, want nil after 2 (the retry after the shutdown)", err, calls)
	}
	if wctx.Err() != nil {
		t.Fatalf("the flush's context ended before done: %v", wctx.Err())
	}
	done()
	if !errors.Is(wctx.Err(), context.Canceled) {
		t.Fatalf("after done wctx.Err() = %v", wctx.Err())
	}
}

func TestRestoreRetriesUntilTimeout(t *testing.T) {
	calls := 0
	err := Restore(context.Background(), time.Minute, slog.New(slog.DiscardHandler), "restore", func() error {
		if calls++; calls < 3 {
			return errors.New("EOF")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Restore = %v after %d calls, want nil after 3", err, calls)
	}
	down := errors.New("broker down")
	began := time.Now()
	err = Restore(context.Background(), 300*time.Millisecond, slog.New(slog.DiscardHandler), "restore", func() error { return down })
	if !errors.Is(err, down) || time.Since(began) > 5*time.Second {
		t.Fatalf("Restore = %v after %v, want the last error once the timeout passed", err, time.Since(began))
	}
}
