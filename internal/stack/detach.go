package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Detach runs command (a supervisor that calls Start on dir: `stack up`
// without -detach) in a new session with its output appended to
// dir/log/stack.log, and waits until the state file says that process is
// ready; it then leaves it running. It fails if the process exits first,
// or is not ready within timeout (it is left running, for `stack down`).
// If a supervisor already runs in dir, Detach returns its state and
// ErrRunning.
func Detach(ctx context.Context, dir string, command []string, timeout time.Duration, out io.Writer) (State, error) {
	if err := os.MkdirAll(filepath.Join(dir, "log"), 0o755); err != nil {
		return State{}, fmt.Errorf("create state dir: %w", err)
	}
	if st, running, err := ReadState(dir); err == nil && running {
		return st, ErrRunning
	}
	logPath := filepath.Join(dir, "log", "stack.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return State{}, fmt.Errorf("open %s: %w", logPath, err)
	}
	defer lf.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return State{}, err
	}
	defer devNull.Close()

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return State{}, fmt.Errorf("start background stack: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(out, "starting the stack in the background (pid %d, log %s)\n", cmd.Process.Pid, logPath)

	deadline := time.After(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return State{}, fmt.Errorf("background stack exited (%v) before it was ready; see %s", err, logPath)
		case <-deadline:
			return State{}, fmt.Errorf("background stack (pid %d) not ready within %s; see %s, stop it with `stack down`", cmd.Process.Pid, timeout, logPath)
		case <-ctx.Done():
			return State{}, fmt.Errorf("background stack (pid %d) not ready yet: %w; see %s, stop it with `stack down`", cmd.Process.Pid, ctx.Err(), logPath)
		case <-tick.C:
		}
		st, _, err := ReadState(dir)
		if err != nil || st.Pid != cmd.Process.Pid || st.Status != StatusReady {
			continue
		}
		return st, cmd.Process.Release()
	}
}
