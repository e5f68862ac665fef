package retry

import (
	"context"
	"errors"
	"log/slog"
	"testing"
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

func TestFlushContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wctx, giveUp, done := FlushContext(ctx)
	cancel()
	if wctx.Err() != nil {
		t.Fatal("a live flush was cut by its parent ending")
	}
	<-giveUp // retrying ends with the parent
	done()

	wctx, giveUp, done = FlushContext(ctx) // shutdown: bounded, not cut at once
	defer done()
	if wctx.Err() != nil {
		t.Fatal("a shutdown flush got no grace")
	}
	if _, ok := wctx.Deadline(); !ok || giveUp != wctx.Done() {
		t.Fatal("a shutdown flush is not bounded by ShutdownGrace")
	}
}
