package retry

import (
	"errors"
	"testing"
	"time"
)

// TestDoBacksOff: the waits double from First up to Max, and each failure
// is reported with the wait after it.
func TestDoBacksOff(t *testing.T) {
	var waits []time.Duration
	calls := 0
	err := Do(nil, Backoff{First: time.Millisecond, Max: 4 * time.Millisecond}, func() error {
		if calls++; calls < 5 {
			return errors.New("down")
		}
		return nil
	}, func(_ error, wait time.Duration) { waits = append(waits, wait) })
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if err != nil || len(waits) != len(want) {
		t.Fatalf("Do = %v after waits %v, want nil after %v", err, waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
}

// TestDoPermanent: an error marked Permanent ends the retrying at once and
// is returned as it was.
func TestDoPermanent(t *testing.T) {
	bad := errors.New("bad config")
	calls := 0
	err := Do(nil, Writes, func() error { calls++; return Permanent(bad) }, func(error, time.Duration) {
		t.Error("a permanent error was reported as retried")
	})
	if err != bad || calls != 1 {
		t.Fatalf("Do = %v after %d calls, want %v after 1", err, calls, bad)
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
}

// TestDoGivesUp: once giveUp is closed, the failure that follows ends Do
// with fn's last error.
func TestDoGivesUp(t *testing.T) {
	giveUp := make(chan struct{})
	down := errors.New("down")
	calls := 0
	err := Do(giveUp, Backoff{First: time.Millisecond, Max: time.Millisecond}, func() error {
		if calls++; calls == 3 {
			close(giveUp)
		}
		return down
	}, nil)
	if err != down || calls != 3 {
		t.Fatalf("Do = %v after %d calls, want %v after 3", err, calls, down)
	}
}
