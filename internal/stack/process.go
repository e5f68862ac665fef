package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

// procSpec says how to run one child process.
type procSpec struct {
	name string   // short name: broker, ingest, ...; names the log file
	path string   // executable
	args []string // arguments after the executable
	env  []string // full environment
	log  string   // log file path (stdout and stderr, appended)
}

// process is one running child. The supervisor owns it: only Stop ends it
// on purpose, anything else is an unexpected exit reported on the stack's
// exit channel.
type process struct {
	spec     procSpec
	cmd      *exec.Cmd
	logFile  *os.File
	done     chan struct{} // closed when Wait returned
	waitErr  error         // valid after done is closed
	stopping atomic.Bool   // set before an intentional stop
}

// startProcess starts spec with its output appended to its log file. The
// child gets its own process group, so a Ctrl-C in the terminal reaches only
// the supervisor, which then stops children in order; on Linux it also gets
// SIGTERM if the supervisor dies without stopping it.
func startProcess(spec procSpec, onExit func(*process)) (*process, error) {
	if err := os.MkdirAll(filepath.Dir(spec.log), 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	lf, err := os.OpenFile(spec.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", spec.name, err)
	}
	fmt.Fprintf(lf, "\n=== %s: starting %s %v\n", time.Now().Format(time.RFC3339), spec.path, spec.args)

	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = spec.env
	cmd.Stdout = lf
	cmd.Stderr = lf
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	p := &process{spec: spec, cmd: cmd, logFile: lf, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		fmt.Fprintf(lf, "=== %s: %s exited: %v\n", time.Now().Format(time.RFC3339), spec.name, exitStatus(p.waitErr))
		lf.Close()
		close(p.done)
		if onExit != nil && !p.stopping.Load() {
			onExit(p)
		}
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an exit of p that nobody asked for.
func (p *process) exitError() *ExitError {
	return &ExitError{Name: p.spec.name, Pid: p.pid(), Log: p.spec.log, Err: p.waitErr}
}

// stop asks p to stop with SIGTERM, waits up to grace, then kills it. It
// returns an error only if the process could not be made to exit.
func (p *process) stop(ctx context.Context, grace time.Duration) error {
	p.stopping.Store(true)
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return fmt.Errorf("%s did not stop within %s and was killed", p.spec.name, grace)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.spec.name, p.pid())
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// tail returns the last n lines of the file at path, for error messages
// that should show why a child failed without sending the operator hunting.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// withTail appends the end of a child's log to err.
func withTail(err error, logPath string) error {
	t := tail(logPath, 20)
	if t == "" {
		return err
	}
	return fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, logPath, t)
}

// alive reports whether a process with pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
