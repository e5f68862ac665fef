package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/chserver"
	"github.com/driftline/driftline/internal/debpkg"
)

// EnvCI is set to true by CI systems (and by .ci/run). Under it a test
// that cannot get a component it needs fails instead of skipping, so a
// CI run never passes with tests silently left out.
const EnvCI = "CI"

// CI reports whether the tests run under CI (EnvCI true).
func CI() bool {
	ci, _ := strconv.ParseBool(os.Getenv(EnvCI))
	return ci
}

// Unavailable ends a test that cannot get a component it needs: outside
// CI it skips with the reason, which should say how to get the
// component; under CI it fails.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s (%s=true: a missing component fails the test)", msg, EnvCI)
		return
	}
	t.Skipf("%s (skipped outside CI; with %s=true this fails)", msg, EnvCI)
}

// ClickHouseServer returns the ClickHouse server binary, installing
// Debian's clickhouse-server with apt-get when it is missing and the test
// runs as root (once per machine); otherwise the test is Unavailable.
// Tests that start servers of their own use it; ClickHouse (the shared
// server) installs the same way.
func ClickHouseServer(t testing.TB) chserver.Binary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := findClickHouse(ctx, t)
	if err != nil {
		Unavailable(t, "testenv: %v", err)
	}
	return bin
}

// findClickHouse finds the server binary, installing it first if it is
// missing and we may.
func findClickHouse(ctx context.Context, t testing.TB) (chserver.Binary, error) {
	bin, err := chserver.Find()
	if errors.Is(err, chserver.ErrNotFound) && os.Geteuid() == 0 {
		t.Logf("testenv: no ClickHouse server binary; installing clickhouse-server with apt-get (once per machine)")
		var out bytes.Buffer
		if ierr := chserver.Install(ctx, &out); ierr != nil {
			return bin, fmt.Errorf("%w\napt-get output:\n%s", ierr, out.Bytes())
		}
		bin, err = chserver.Find()
	}
	return bin, err
}

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// Chromium returns the path of Debian's chromium for a browser test. When
// it is missing and the test runs as root under CI it is installed with
// apt-get (a large package, so never unasked on a developer's machine);
// otherwise the test is Unavailable.
func Chromium(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err == nil {
		return ChromiumPath
	}
	if os.Geteuid() != 0 || !CI() {
		Unavailable(t, "%s is missing; install Debian's chromium package (apt-get install chromium) to run this test", ChromiumPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t.Logf("testenv: installing chromium (apt-get install -y chromium)")
	var out bytes.Buffer
	err := debpkg.Install(ctx, &out, "chromium", "apt-get update && apt-get install -y chromium", func() error {
		_, err := os.Stat(ChromiumPath)
		return err
	})
	if err != nil {
		t.Fatalf("testenv: %v\n%s", err, lastBytes(out.Bytes(), 2000))
	}
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("testenv: chromium installed but %s is missing", ChromiumPath)
	}
	return ChromiumPath
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
