package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/driftline/driftline/internal/chserver"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// clusterBasePort is the local cluster's first port: ZooKeeper on it, the
// servers' native ports after it (29001-29004), HTTP from +101, the
// replicas' interserver ports from +201.
const clusterBasePort = 29000

// cmdClusterUp starts the local cluster in the background (its processes
// outlive this command; cluster-down stops them), migrates the read model
// on it in cluster mode and prints how to point the services at it.
func cmdClusterUp(args []string) error {
	fs, o, parse := flags("cluster-up")
	base := fs.Int("cluster.basePort", clusterBasePort, "first port of the cluster: ZooKeeper on it, the servers' native ports from +1, HTTP from +101, interserver from +201")
	name := fs.String("cluster.name", chserver.DefaultClusterName, "the cluster's name, for -clickhouse.cluster")
	db := fs.String("clickhouse.db", service.Env("DRIFTLINE_CLICKHOUSE_DB", service.DefaultDatabase), "database of the read model to migrate")
	if err := parse(args); err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	bin, err := chserver.Find()
	if err != nil {
		return err
	}
	dir := filepath.Join(o.Dir, "cluster")
	c, err := chserver.StartCluster(ctx, chserver.ClusterOptions{Dir: dir, Name: *name, BasePort: *base, Binary: bin})
	if err != nil {
		return err
	}
	cfg := service.ClickHouse{Addr: strings.Join(c.Addrs(), ","), Database: *db, User: "default", Cluster: c.Name()}
	mctx, mcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer mcancel()
	if err := readmodel.OpenMigrate(mctx, cfg); err != nil {
		return fmt.Errorf("migrate the cluster (it keeps running; stack cluster-down stops it): %w", err)
	}
	fmt.Fprintf(os.Stdout, `ClickHouse cluster %q is up (data in %s):
  ZooKeeper   %s
`, c.Name(), dir, c.ZooKeeper().Addr())
	for i, a := range c.Addrs() {
		fmt.Fprintf(os.Stdout, "  shard %d replica %d  native %s  http %s\n", i/2+1, i%2+1, a, c.Server(i).HTTPAddr())
	}
	fmt.Fprintf(os.Stdout, `Database %s is migrated in cluster mode. Point the services at it with
  -clickhouse.addr %s -clickhouse.cluster %s -clickhouse.db %s
or DRIFTLINE_CLICKHOUSE_ADDR=%s DRIFTLINE_CLICKHOUSE_CLUSTER=%s;
the whole local stack on it: DRIFTLINE_EXTERNAL_CLICKHOUSE=1 with those two, then make up.
Stop it with: make cluster-down
`, *db, cfg.Addr, c.Name(), *db, cfg.Addr, c.Name())
	return nil
}

// cmdClusterDown stops the cluster cluster-up started.
func cmdClusterDown(args []string) error {
	_, o, parse := flags("cluster-down")
	if err := parse(args); err != nil {
		return err
	}
	return chserver.StopClusterDir(filepath.Join(o.Dir, "cluster"))
}
