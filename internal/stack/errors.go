package stack

import (
	"errors"
	"fmt"
)

// ErrRunning is returned by Start when another supervisor already holds the
// state directory.
var ErrRunning = errors.New("a stack is already running in this state directory")

// ErrNotRunning is returned by Down when no supervisor holds the state
// directory.
var ErrNotRunning = errors.New("no stack is running in this state directory")

// ExitError says that a child process ended on its own: the supervisor does
// not restart children, so this is reported and the rest keep running.
type ExitError struct {
	Name string // child name: clickhouse, broker, ingest, ...
	Pid  int    // its process id
	Log  string // path of its log file
	Err  error  // what Wait returned; nil for a clean exit
}

func (e *ExitError) Error() string {
	status := "exited"
	if e.Err != nil {
		status = e.Err.Error()
	}
	return fmt.Sprintf("%s (pid %d) stopped unexpectedly: %s; see %s", e.Name, e.Pid, status, e.Log)
}

// Unwrap returns the underlying wait error.
func (e *ExitError) Unwrap() error { return e.Err }
