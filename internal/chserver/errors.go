package chserver

import (
	"errors"
	"fmt"
)

// ErrNotFound means no ClickHouse server binary was found. The error
// returned by Find wraps it and says how to install one.
var ErrNotFound = errors.New("clickhouse server binary not found")

// ErrNotRoot means Install was asked to install packages without root
// privileges. The error returned wraps it and names the command to run.
var ErrNotRoot = errors.New("installing clickhouse-server needs root")

// InstallHint is the command that installs the server on Debian and Ubuntu.
const InstallHint = "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y clickhouse-server"

// PortInUseError means a port Start needs answers, but not as the server
// of Options.Dir.
type PortInUseError struct {
	Addr string // the taken host:port
	Hint string // the setting that moves the server to another port
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("%s is in use by another process, not by the ClickHouse server of this directory; "+
		"Possible solutions: stop that process, or %s", e.Addr, e.Hint)
}

// StartError means the server process did not become ready. It carries
// the tail of the server's logs, which usually names the cause.
type StartError struct {
	Dir     string // the server directory, holding log/
	Err     error  // what went wrong: exit status or timeout
	LogTail string // last lines of the server's logs
}

func (e *StartError) Error() string {
	msg := fmt.Sprintf("start clickhouse server in %s: %v", e.Dir, e.Err)
	if e.LogTail != "" {
		msg += "\nlast lines of the server log:\n" + e.LogTail
	}
	return msg
}

func (e *StartError) Unwrap() error { return e.Err }
