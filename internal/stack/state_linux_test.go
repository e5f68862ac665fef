package stack

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestWaitGone: a process killed with SIGKILL counts as gone as soon as
// it has exited, even before its parent reaps it (a dead supervisor's
// children are reaped by whoever adopted them, maybe late), and a
// process that still runs makes waitGone wait out its timeout.
func TestWaitGone(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // reaped only here: a zombie until then
	}()

	began := time.Now()
	if waitGone([]int{pid}, 100*time.Millisecond) {
		t.Fatal("a running process counted as gone")
	}
	if d := time.Since(began); d < 100*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitGone([]int{pid}, killWait) {
		t.Fatal("a killed process did not count as gone")
	}
	if !alive(pid) || !zombie(pid) {
		t.Fatalf("pid %d: alive %v, zombie %v; want an unreaped zombie", pid, alive(pid), zombie(pid))
	}
}
