package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/chserver"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// sharedCluster is the ClickHouse cluster started for this test binary.
var sharedCluster struct {
	once sync.Once
	c    *chserver.LocalCluster
	dir  string
	err  error
}

// ClickHouseCluster returns the settings of a new database, migrated in
// cluster mode (readmodel.MigrateCluster), on this test binary's local
// cluster: ZooKeeper and two shards of two ClickHouse servers, started at
// the first call in a temporary directory and shared by every test of the
// binary. Addr lists the four servers. ZooKeeper is Debian's zookeeper
// package, installed with apt-get when it is missing and the test runs as
// root; otherwise the test is Unavailable. The database is dropped ON
// CLUSTER when the test ends, unless the test failed.
func ClickHouseCluster(t testing.TB) (service.ClickHouse, *chserver.LocalCluster) {
	t.Helper()
	bin := ClickHouseServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := chserver.FindZooKeeper(); errors.Is(err, chserver.ErrZooKeeperNotFound) {
		if os.Geteuid() != 0 {
			Unavailable(t, "testenv: %v", err)
		}
		t.Logf("testenv: no ZooKeeper; installing Debian's zookeeper with apt-get (once per machine)")
		var out bytes.Buffer
		if err := chserver.InstallZooKeeper(ctx, &out); err != nil {
			t.Fatalf("testenv: %v\napt-get output:\n%s", err, lastBytes(out.Bytes(), 2000))
		}
	}
	sharedCluster.once.Do(func() {
		dir, err := os.MkdirTemp("", "driftline-cluster-")
		if err != nil {
			sharedCluster.err = err
			return
		}
		sharedCluster.dir = dir
		sharedCluster.c, sharedCluster.err = chserver.StartCluster(ctx, chserver.ClusterOptions{
			Dir: dir, Binary: bin, DieWithParent: true,
		})
	})
	if sharedCluster.err != nil {
		t.Fatalf("testenv: start the ClickHouse cluster: %v", sharedCluster.err)
	}
	c := sharedCluster.c
	cfg := service.ClickHouse{
		Addr:     strings.Join(c.Addrs(), ","),
		Database: databaseName(t),
		User:     "default",
		Cluster:  c.Name(),
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: kept ClickHouse database %s on cluster %s (%s) for inspection", cfg.Database, cfg.Cluster, sharedCluster.dir)
			return
		}
		if err := drop(cfg, 2*time.Minute); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	if err := readmodel.MigrateCluster(ctx, cfg); err != nil {
		t.Fatalf("testenv: migrate on cluster: %v", err)
	}
	return cfg, c
}

// stopSharedCluster stops this test binary's cluster, if it started one,
// and removes its directory unless tests failed.
func stopSharedCluster(passed bool) error {
	if sharedCluster.c == nil {
		return nil
	}
	return stopAndRemove(sharedCluster.c.Stop, sharedCluster.dir, "cluster", passed)
}
