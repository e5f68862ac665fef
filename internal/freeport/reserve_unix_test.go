//go:build unix

package freeport

import (
	"errors"
	"syscall"
	"testing"
)

// otherHolds takes port's lock as another process would (lockPort: a
// lock on its own open file), reporting whether it got it; release
// drops it.
func otherHolds(t *testing.T, port int) (got bool, release func()) {
	t.Helper()
	f, err := lockPort(port)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, func() {}
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, func() { f.Close() }
}

// TestPickReservesAcrossProcesses: a picked port's lock is held, so that
// another process picking ports skips it, and a port whose lock another
// process holds is not reserved here.
func TestPickReservesAcrossProcesses(t *testing.T) {
	if ephemeralStart()-lowest < 1000 {
		t.Skip("no room below the ephemeral range: ports come from the kernel")
	}
	p, err := Pick("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got, release := otherHolds(t, p); got {
		release()
		t.Fatalf("picked port %d: its lock is free, want it held by this process", p)
	}

	q := p + 1
	got, release := otherHolds(t, q)
	if !got {
		t.Skipf("port %d's lock is held by another process", q)
	}
	if reserve(q) {
		t.Fatalf("port %d reserved while another holder has its lock", q)
	}
	release()
	if !reserve(q) {
		t.Fatalf("port %d not reserved once its lock was released", q)
	}
}
