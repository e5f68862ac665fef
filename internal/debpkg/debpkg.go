// Package debpkg installs Debian packages with apt-get for the development
// stack and the tests that need a program the machine lacks (ClickHouse,
// ZooKeeper, Chromium).
//
// Every install of every process takes one machine-wide lock: test
// binaries of several packages may find a package missing at the same
// moment, and apt refuses a second apt-get at once ("Could not get lock
// /var/lib/apt/lists/lock"). One installs while the others wait, and each
// looks again for what it needs once it holds the lock. An apt-get of
// someone else's (unattended upgrades, an operator) is waited for too:
// dpkg's lock with DPkg::Lock::Timeout, the package lists' lock by trying
// again.
package debpkg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// LockFile is the machine-wide lock every install takes, in the
// temporary directory.
const LockFile = "driftline-apt.lock"

// lockWait bounds how long an apt-get held by another program is waited
// for, and lockRetry is the pause between two tries (variables for the
// tests).
var (
	lockWait  = 10 * time.Minute
	lockRetry = 2 * time.Second
)

// Install installs Debian's package pkg with `apt-get update` and
// `apt-get install -y pkg`, writing apt's output to log (nil discards it),
// unless installed reports it present once the machine-wide lock is held.
// hint is the command an operator can run by hand; it is named in the
// error when apt fails. Install needs root; ctx bounds the whole install.
func Install(ctx context.Context, log io.Writer, pkg, hint string, installed func() error) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("installing %s needs root; Possible solutions: run `sudo sh -c '%s'`", pkg, hint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("install %s: apt-get not found; Possible solutions: install it with your system's package manager", pkg)
	}
	unlock, err := lock(pkg)
	if err != nil {
		return err
	}
	defer unlock()
	if installed() == nil {
		return nil // installed while we waited
	}
	for _, args := range [][]string{{"update"}, {"install", "-y", pkg}} {
		if err := aptGet(ctx, log, args); err != nil {
			return fmt.Errorf("apt-get %s: %w; Possible solutions: run `%s` by hand and read its output", args[0], err, hint)
		}
	}
	return nil
}

// lock takes the machine-wide install lock and returns its release.
func lock(pkg string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), LockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", pkg, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("install %s: lock: %w", pkg, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// errBusy is an apt-get that failed because another apt held a lock.
var errBusy = errors.New("another apt-get holds its lock")

// aptGet runs apt-get with args, trying again while another program's
// apt-get holds a lock that DPkg::Lock::Timeout does not wait for (the
// package lists' lock of `apt-get update`), for up to lockWait.
func aptGet(ctx context.Context, log io.Writer, args []string) error {
	if log == nil {
		log = io.Discard
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := aptGetOnce(ctx, log, args)
		if !errors.Is(err, errBusy) || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(log, "debpkg: %v; trying again in %s\n", err, lockRetry)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-time.After(lockRetry):
		}
	}
}

func aptGetOnce(ctx context.Context, log io.Writer, args []string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=600"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.Stdout = io.MultiWriter(log, &out)
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	if err != nil && bytes.Contains(out.Bytes(), []byte("Could not get lock")) {
		return fmt.Errorf("%w: %w", errBusy, err)
	}
	return err
}
