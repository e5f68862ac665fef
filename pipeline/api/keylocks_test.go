package api

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestKeyLocks: a key is held by one request at a time, other keys are
// not held up by it, a wait ends with its context, and a key no request
// holds or waits for leaves the table.
func TestKeyLocks(t *testing.T) {
	var l keyLocks
	ctx := context.Background()
	unlockA, err := l.lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.lock(ctx, "b")
	if err != nil {
		t.Fatalf("key b while a is held: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("key a while held: %v, want %v", err, context.DeadlineExceeded)
	}
	got := make(chan func())
	go func() {
		unlock, err := l.lock(ctx, "a")
		if err != nil {
			panic("BUG: a lock without deadline failed: " + err.Error())
		}
		got <- unlock
	}()
	select {
	case <-got:
		t.Fatal("key a taken twice")
	case <-time.After(20 * time.Millisecond):
	}
	unlockA()
	unlockA2 := <-got
	unlockA2()
	unlockB()
	if n := len(l.held); n != 0 {
		t.Errorf("%d keys left in the table after every request let go, want 0", n)
	}
}
