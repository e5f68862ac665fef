package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// State files under Options.Dir.
const (
	stateFile = "stack.json" // State of the running supervisor
	lockFile  = "stack.lock" // flock held by the running supervisor
)

// State is what a running supervisor publishes in Dir/stack.json, so that
// `stack down` and `stack status` in another process can find it.
type State struct {
	Pid        int           `json:"pid"`    // supervisor process id
	Status     string        `json:"status"` // starting, ready, stopping
	StartedAt  time.Time     `json:"started_at"`
	Dir        string        `json:"dir"`
	Broker     string        `json:"broker"`
	ClickHouse string        `json:"clickhouse"`      // native address
	HTTP       string        `json:"clickhouse_http"` // ClickHouse HTTP address
	Database   string        `json:"database"`
	Ingest     string        `json:"ingest_url,omitempty"`
	Query      string        `json:"query_url,omitempty"`
	Joiner     string        `json:"joiner_url,omitempty"`
	Rater      string        `json:"rater_url,omitempty"`
	Children   []ChildStatus `json:"children"`
}

// ChildStatus names one child process of the supervisor.
type ChildStatus struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	Log  string `json:"log"`
}

// Supervisor states.
const (
	StatusStarting = "starting"
	StatusReady    = "ready"
	StatusStopping = "stopping"
)

// ReadState returns the state a supervisor published in dir, and whether
// that supervisor is still running (it holds the directory's lock). A
// missing state file is ErrNotRunning.
func ReadState(dir string) (State, bool, error) {
	var st State
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, false, ErrNotRunning
	}
	if err != nil {
		return st, false, fmt.Errorf("read stack state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, fmt.Errorf("read stack state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return st, locked(dir), nil
}

func writeState(dir string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		panic("BUG: marshal state: " + err.Error())
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write stack state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("write stack state: %w", err)
	}
	return nil
}

// lockDir takes the directory's supervisor lock. The kernel drops a flock
// when its holder dies, so a crashed supervisor never blocks the next one
// and pid reuse cannot fool the check.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open stack lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("lock stack dir: %w", err)
	}
	return f, nil
}

// locked reports whether a supervisor holds dir's lock.
func locked(dir string) bool {
	f, err := lockDir(dir)
	if err != nil {
		return errors.Is(err, ErrRunning)
	}
	unlock(f)
	return false
}

func unlock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// Down stops the supervisor running in dir (started by another process,
// e.g. `stack up -detach`): it sends SIGTERM, so the supervisor stops its
// children in order, and waits until it released the directory. After
// timeout it kills the supervisor and any child still alive. Down returns
// ErrNotRunning if nothing runs there.
func Down(ctx context.Context, dir string, timeout time.Duration) error {
	st, running, err := ReadState(dir)
	if err != nil {
		return err
	}
	if !running {
		// The supervisor died without stopping; its children got SIGTERM
		// from the kernel (Linux), but make sure, and stop the ClickHouse
		// server it left for reattaching.
		if n := stopStale(st.Children, timeout); n > 0 {
			return fmt.Errorf("%w (its supervisor died); stopped %d processes it left behind", ErrNotRunning, n)
		}
		return ErrNotRunning
	}
	if err := syscall.Kill(st.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal stack supervisor (pid %d): %w", st.Pid, err)
	}
	deadline := time.Now().Add(timeout)
	for locked(dir) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			left := liveChildren(st.Children)
			_ = syscall.Kill(st.Pid, syscall.SIGKILL)
			killChildren(left, syscall.SIGKILL)
			err := fmt.Errorf("stack supervisor (pid %d) did not stop within %s; killed it and its children", st.Pid, timeout)
			// Return once they are gone, so their ports and the
			// directory are free for the next start.
			pids := []int{st.Pid}
			for _, c := range left {
				pids = append(pids, c.Pid)
			}
			if !waitGone(pids, killWait) {
				err = fmt.Errorf("%w, but some still ran %s later", err, killWait)
			}
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// killWait bounds the wait for processes to go after SIGKILL, which the
// kernel delivers at once; only a process stuck in the kernel (a hung
// disk) outlives it.
const killWait = 5 * time.Second

// waitGone polls until none of pids runs (a zombie, killed but not yet
// reaped by its new parent, counts as gone), or timeout passes; it
// reports whether they all went.
func waitGone(pids []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		left := 0
		for _, pid := range pids {
			if alive(pid) && !zombie(pid) {
				left++
			}
		}
		if left == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// zombie reports whether pid has exited and waits only to be reaped;
// without /proc it reports false.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and
	// may itself hold spaces or parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// liveChildren returns the recorded children that still run the recorded
// executable; a pid reused by an unrelated process is left out.
func liveChildren(children []ChildStatus) []ChildStatus {
	var out []ChildStatus
	for _, c := range children {
		if c.Pid > 0 && alive(c.Pid) && sameProcess(c) {
			out = append(out, c)
		}
	}
	return out
}

// stopStale stops the children a dead supervisor left behind: SIGTERM, then
// SIGKILL for those still alive after timeout. It returns once they are gone,
// so their ports are free, and returns how many it stopped.
func stopStale(children []ChildStatus, timeout time.Duration, skip ...string) int {
	left := slices.DeleteFunc(liveChildren(children), func(c ChildStatus) bool { return slices.Contains(skip, c.Name) })
	if len(left) == 0 {
		return 0
	}
	pids := make([]int, len(left))
	for i, c := range left {
		pids[i] = c.Pid
	}
	killChildren(left, syscall.SIGTERM)
	if !waitGone(pids, timeout) {
		killChildren(left, syscall.SIGKILL)
		waitGone(pids, killWait)
	}
	return len(left)
}

// killChildren signals the recorded children that still run the recorded
// executable; a pid reused by an unrelated process is left alone.
func killChildren(children []ChildStatus, sig syscall.Signal) {
	for _, c := range liveChildren(children) {
		_ = syscall.Kill(c.Pid, sig)
	}
}

// sameProcess checks, where /proc exists, that pid is still our child: it
// writes to the log recorded for it, or (ClickHouse, whose output goes
// through a pipe) its command line names the state directory.
func sameProcess(c ChildStatus) bool {
	if c.Log == "" {
		return false
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return true // no /proc: trust the pid
	}
	want, err := filepath.EvalSymlinks(c.Log)
	if err != nil {
		return false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.Pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if t, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", c.Pid, fd.Name())); err == nil && t == want {
			return true
		}
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.Pid))
	stateDir := filepath.Dir(filepath.Dir(want)) // Dir/log/<name>.log
	return err == nil && strings.Contains(string(cmdline), stateDir+string(filepath.Separator))
}
