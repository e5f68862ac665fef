//go:build unix

package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// lockPort takes port's lock as another process would (a lock on its own
// open file), reporting whether it got it; release drops it.
func lockPort(t *testing.T, port int) (got bool, release func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "driftline-ports", strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false, func() {}
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
	if got, release := lockPort(t, p); got {
		release()
		t.Fatalf("picked port %d: its lock is free, want it held by this process", p)
	}

	q := p + 1
	got, release := lockPort(t, q)
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
