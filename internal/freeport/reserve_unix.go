//go:build unix

package freeport

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// reserved holds the files whose locks reserve this process's ports.
var reserved []*os.File

// reserve claims port among the processes of this machine that pick
// ports with this package (the test binaries of several packages at
// once, say): a lock on a file named after the port in the temporary
// directory, held until the process exits. A port's server may stop and
// start again on it (a test that kills and restarts a database); without
// the lock, another process could find it free meanwhile and take it. It
// reports false when another process holds the port's lock; when no lock
// can be taken at all (no writable temporary directory), it claims
// nothing and reports true.
func reserve(port int) bool {
	f, err := lockPort(port)
	if err != nil {
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	reserved = append(reserved, f)
	return true
}

// lockPort takes the lock of port's file on a file of its own, so that
// it conflicts with every other holder, this process's too; the error
// is syscall.EWOULDBLOCK when another holds it. Closing the file drops
// the lock.
func lockPort(port int) (*os.File, error) {
	dir := filepath.Join(os.TempDir(), "driftline-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
