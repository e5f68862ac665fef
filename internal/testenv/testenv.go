// Package testenv gives tests the real components they run against: a
// ClickHouse server with a fresh, migrated database per test, and an
// in-process Kafka-protocol cluster (kfake) with the pipeline's topics.
//
// Packages that use it run their tests through Main:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// ClickHouse comes from $DRIFTLINE_TEST_CLICKHOUSE_ADDR when set (a server
// the developer or CI runs), otherwise from a server that testenv starts
// once per test binary in a temporary directory, on free loopback ports.
// That server dies with the test binary, even one killed by a timeout, and
// Main stops it after the tests.
package testenv

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/driftline/driftline/internal/freeport"
)

// Main runs the tests of a package, stops the ClickHouse server it
// started, if any, and then fails the run if goroutines are left over
// (goleak; leakOpts tolerate known ones). It does not return.
func Main(m *testing.M, leakOpts ...goleak.Option) {
	code := m.Run()
	for _, stop := range []func(bool) error{stopShared, stopSharedCluster} {
		if err := stop(code == 0); err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if code == 0 {
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// CheckFor polls f until it returns nil, and fails the test with f's last
// error if that has not happened within timeout. Tests wait for effects
// with it instead of sleeping.
func CheckFor(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true within %s: %v", timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func freePort() (int, error) { return freeport.Pick("127.0.0.1") }
