package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/internal/chserver"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// Environment variables that point tests at a ClickHouse server of one's
// own instead of the one testenv starts.
const (
	EnvClickHouseAddr     = "DRIFTLINE_TEST_CLICKHOUSE_ADDR"
	EnvClickHouseUser     = "DRIFTLINE_TEST_CLICKHOUSE_USER"
	EnvClickHousePassword = "DRIFTLINE_TEST_CLICKHOUSE_PASSWORD"
	// EnvClickHouseCluster=1 gives every test that asks for ClickHouse a
	// database in cluster mode on the local cluster (ClickHouseCluster),
	// to run a package's tests against the cluster's Distributed tables.
	EnvClickHouseCluster = "DRIFTLINE_TEST_CLICKHOUSE_CLUSTER"
)

// shared is the server started for this test binary.
var shared struct {
	once sync.Once
	srv  *chserver.Server
	err  error
}

// ClickHouse returns the settings of a new database, migrated to the
// current schema, on the test ClickHouse server. The database is dropped
// when the test ends, unless the test failed: then it is kept for
// inspection and its name logged.
func ClickHouse(t testing.TB) service.ClickHouse {
	t.Helper()
	if on, _ := strconv.ParseBool(os.Getenv(EnvClickHouseCluster)); on {
		cfg, _ := ClickHouseCluster(t)
		return cfg
	}
	cfg := service.ClickHouse{
		Addr:     os.Getenv(EnvClickHouseAddr),
		Database: databaseName(t),
		User:     service.Env(EnvClickHouseUser, "default"),
		Password: os.Getenv(EnvClickHousePassword),
	}
	if cfg.Addr == "" {
		shared.once.Do(func() { shared.srv, shared.err = startShared(t) })
		if shared.err != nil {
			t.Fatal(shared.err)
		}
		cfg.Addr = shared.srv.Addr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := readmodel.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer conn.Close()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: kept ClickHouse database %s on %s for inspection", cfg.Database, cfg.Addr)
			return
		}
		if err := drop(cfg, time.Minute); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	if err := readmodel.Migrate(ctx, conn, cfg.Database); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return cfg
}

// Open connects to cfg, failing the test if that takes an error or more
// than 30 s, and closes the connection when the test ends.
func Open(t testing.TB, cfg service.ClickHouse, opts ...readmodel.Opt) driver.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := readmodel.Open(ctx, cfg, opts...)
	if err != nil {
		t.Fatalf("open clickhouse database %s: %v", cfg.Database, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// ClickHouseConn is ClickHouse and Open: a connection to a new migrated
// database, and the database's settings.
func ClickHouseConn(t testing.TB) (driver.Conn, service.ClickHouse) {
	t.Helper()
	cfg := ClickHouse(t)
	return Open(t, cfg), cfg
}

// drop drops cfg's database; in cluster mode on every server of
// cfg.Cluster, which takes longer, hence the timeout.
func drop(cfg service.ClickHouse, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	admin := cfg
	admin.Database = "default"
	conn, err := readmodel.Open(ctx, admin, readmodel.NoCreate())
	if err != nil {
		return fmt.Errorf("drop database %s: %w", cfg.Database, err)
	}
	defer conn.Close()
	stmt, what := "DROP DATABASE IF EXISTS "+cfg.Database, cfg.Database
	if cfg.Cluster != "" {
		stmt += " ON CLUSTER " + cfg.Cluster
		what += " on cluster " + cfg.Cluster
	}
	if err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("drop database %s: %w", what, err)
	}
	return nil
}

// databaseName makes a name that is unique even among test binaries
// sharing one server, and that says which test made it.
func databaseName(t testing.TB) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 42 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:]) // never fails
	return b.String() + "_" + hex.EncodeToString(suffix[:])
}

// startShared starts this test binary's server, installing ClickHouse
// first if it is missing and we may.
func startShared(t testing.TB) (*chserver.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := findClickHouse(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w; or set %s to a running server's native address", err, EnvClickHouseAddr)
	}
	dir, err := os.MkdirTemp("", "driftline-clickhouse-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	// The free ports may be taken between finding and binding them.
	for attempt := 0; ; attempt++ {
		tcp, err := freePort()
		if err != nil {
			return nil, err
		}
		http, err := freePort()
		if err != nil {
			return nil, err
		}
		srv, err := chserver.Start(ctx, chserver.Options{
			Dir:           dir,
			TCPPort:       tcp,
			HTTPPort:      http,
			Binary:        bin,
			DieWithParent: true,
		})
		var inUse *chserver.PortInUseError
		if errors.As(err, &inUse) && attempt < 3 || tcp == http {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		return srv, nil
	}
}

// stopShared stops this test binary's server, if it started one, and
// removes its directory unless tests failed.
func stopShared(passed bool) error {
	if shared.srv == nil {
		return nil
	}
	return stopAndRemove(shared.srv.Stop, shared.srv.Dir(), "server", passed)
}

// stopAndRemove stops with stop what runs in dir (what names it in the
// message), then removes dir, or keeps it if tests failed.
func stopAndRemove(stop func() error, dir, what string, passed bool) error {
	err := stop()
	if !passed {
		fmt.Fprintf(os.Stderr, "testenv: kept the ClickHouse %s directory %s for inspection\n", what, dir)
		return err
	}
	if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
