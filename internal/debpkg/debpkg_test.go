package debpkg

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeAptGet puts an apt-get on PATH that fails as a busy apt does for its
// first `busy` calls, then succeeds, and returns the file its calls are
// counted in.
func fakeAptGet(t *testing.T, busy int) string {
	return fakeAptGetThen(t, busy, `echo "done $@"`)
}

// fakeAptGetThen is fakeAptGet with then, a shell command, as what the
// calls after the busy ones do.
func fakeAptGetThen(t *testing.T, busy int, then string) string {
	t.Helper()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := `#!/bin/sh
echo "$@" >> ` + calls + `
n=$(wc -l < ` + calls + `)
if [ "$n" -le ` + strconv.Itoa(busy) + ` ]; then
  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1 (apt-get)" >&2
  exit 100
fi
` + then + "\n"
	if err := os.WriteFile(filepath.Join(dir, "apt-get"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return calls
}

func lines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestAptGetTriesAgainWhileAnotherHoldsTheLock(t *testing.T) {
	lockRetry = time.Millisecond
	t.Cleanup(func() { lockRetry = 2 * time.Second })
	calls := fakeAptGet(t, 2)
	var log bytes.Buffer
	if err := aptGet(context.Background(), &log, []string{"update"}); err != nil {
		t.Fatalf("aptGet: %v\n%s", err, log.String())
	}
	if got := lines(t, calls); len(got) != 3 {
		t.Fatalf("apt-get ran %d times (%q), want 2 busy tries and 1 that succeeds", len(got), got)
	}
	if !strings.Contains(log.String(), "trying again") || !strings.Contains(log.String(), "done -o DPkg::Lock::Timeout=600 update") {
		t.Fatalf("log does not show the retries and the last run:\n%s", log.String())
	}
}

func TestAptGetGivesUpAfterTheWait(t *testing.T) {
	lockRetry, lockWait = time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { lockRetry, lockWait = 2*time.Second, 10*time.Minute })
	fakeAptGet(t, 9)
	err := aptGet(context.Background(), nil, []string{"update"})
	if !errors.Is(err, errBusy) {
		t.Fatalf("aptGet = %v, want errBusy once the wait ran out", err)
	}
}

func TestAptGetFailureIsNotRetried(t *testing.T) {
	calls := fakeAptGetThen(t, 0, "echo 'E: Unable to locate package nope' >&2; exit 100")
	err := aptGet(context.Background(), nil, []string{"install", "-y", "nope"})
	if err == nil || errors.Is(err, errBusy) {
		t.Fatalf("aptGet = %v, want the failure itself", err)
	}
	if got := lines(t, calls); len(got) != 1 {
		t.Fatalf("apt-get ran %d times, want 1", len(got))
	}
}

// Installs of one machine run one at a time, and an install that waited
// finds the package its predecessor installed without running apt-get.
func TestInstallWaitsForTheLockAndLooksAgain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Install needs root")
	}
	calls := fakeAptGet(t, 0)
	unlock, err := lock("first")
	if err != nil {
		t.Fatal(err)
	}
	present := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Install(context.Background(), nil, "pkg", "hint", func() error {
			select {
			case <-present:
				return nil
			default:
				return errors.New("missing")
			}
		})
	}()
	select {
	case err := <-done:
		t.Fatalf("Install returned %v while another install held the lock", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(present) // the first install put the package there
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("Install: %v", err)
	}
	if _, err := os.Stat(calls); !os.IsNotExist(err) {
		t.Fatalf("apt-get ran although the package was present once the lock was held (%v)", err)
	}
}
