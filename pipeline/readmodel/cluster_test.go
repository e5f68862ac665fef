package readmodel_test

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
	chschema "github.com/driftline/driftline/schema/clickhouse"
)

// TestMigrateCluster migrates a database on the local 2x2 cluster in one
// go, and another in two steps (up to 012, then the rest: 013's columns
// are added ON CLUSTER to the replicated tables and the Distributed
// tables are made again with them); both end with the same tables and
// columns on every server, and running the migrations again changes
// nothing. Rows written through the Distributed tables land on the shard
// of their identity and on both of its replicas, and FINAL through the
// Distributed table answers one current row per key, also while a
// replica is killed and after it comes back.
func TestMigrateCluster(t *testing.T) {
	start := time.Now()
	cfg, cluster := testenv.ClickHouseCluster(t)
	// The phases' times are logged: on a loaded machine distributed DDL
	// and replica fetches slow down many times over.
	phase := func(what string) {
		t.Logf("%s: %.1fs into the test", what, time.Since(start).Seconds())
	}
	phase("cluster up, database migrated")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	stepped := cfg
	stepped.Database = cfg.Database + "_steps"
	upTo012 := fstest.MapFS{}
	entries, err := fs.ReadDir(chschema.Migrations, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() < "013" && strings.HasSuffix(e.Name(), ".sql") {
			b, _ := fs.ReadFile(chschema.Migrations, e.Name())
			upTo012[e.Name()] = &fstest.MapFile{Data: b}
		}
	}
	if err := readmodel.MigrateClusterFS(ctx, stepped, upTo012); err != nil {
		t.Fatalf("migrate up to 012: %v", err)
	}
	phase("migrated up to 012")
	if err := readmodel.MigrateCluster(ctx, stepped); err != nil {
		t.Fatalf("migrate the rest: %v", err)
	}
	phase("migrated the rest")
	if err := readmodel.MigrateCluster(ctx, cfg); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	t.Cleanup(func() {
		admin := cfg
		admin.Database = "default"
		conn := testenv.Open(t, admin)
		_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+stepped.Database+" ON CLUSTER "+cfg.Cluster)
	})
	schema := func(addr, db string) string {
		one := service.ClickHouse{Addr: addr, Database: db, User: "default"}
		conn := testenv.Open(t, one, readmodel.NoCreate())
		var out []string
		rows, err := conn.Query(ctx, `SELECT table, name, type FROM system.columns WHERE database = ?`, db)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var tbl, name, typ string
			if err := rows.Scan(&tbl, &name, &typ); err != nil {
				t.Fatal(err)
			}
			out = append(out, tbl+"."+name+" "+typ)
		}
		// Columns come in their table's order (18.16 has no position to
		// sort by); the tables are put in order here.
		sort.SliceStable(out, func(i, j int) bool {
			return strings.SplitN(out[i], ".", 2)[0] < strings.SplitN(out[j], ".", 2)[0]
		})
		return strings.Join(out, "\n")
	}
	want := schema(cluster.Addrs()[0], cfg.Database)
	if !strings.Contains(want, "node_agent_status_local.phase ") || !strings.Contains(want, "node_agent_status.phase ") {
		t.Fatalf("the cluster schema lacks 013's columns:\n%s", want)
	}
	for _, addr := range cluster.Addrs() {
		for _, db := range []string{cfg.Database, stepped.Database} {
			if got := schema(addr, db); got != want {
				t.Errorf("schema of %s on %s differs from %s on %s:\n%s\nwant\n%s", db, addr, cfg.Database, cluster.Addrs()[0], got, want)
			}
		}
	}

	conn := testenv.Open(t, cfg)
	write := func(version int, from, to int) {
		t.Helper()
		batch, err := conn.PrepareBatch(ctx, "INSERT INTO drift_evidence (evidence_id, version, status)")
		if err != nil {
			t.Fatalf("insert through the Distributed table: %v", err)
		}
		for i := from; i < to; i++ {
			if err := batch.Append(fmt.Sprintf("ev-%d", i), uint64(version), string(contract.StatusOpen)); err != nil {
				t.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			t.Fatalf("insert through the Distributed table: %v", err)
		}
	}
	// A write is acknowledged by one replica per shard; a read may ask
	// the other before it has fetched the write, so reads poll.
	current := func(wantRows, wantNewest uint64) {
		t.Helper()
		testenv.CheckFor(t, time.Minute, func() error {
			var rows, newest uint64
			if err := conn.QueryRow(ctx, "SELECT count(), countIf(version = 2) FROM drift_evidence FINAL").Scan(&rows, &newest); err != nil {
				return fmt.Errorf("read through the Distributed table: %w", err)
			}
			if rows != wantRows || newest != wantNewest {
				return fmt.Errorf("FINAL through the Distributed table: %d rows, %d at version 2; want %d and %d", rows, newest, wantRows, wantNewest)
			}
			return nil
		})
	}
	write(1, 0, 200)
	write(2, 0, 100)
	current(200, 100)
	phase("written and read")

	// A replica killed: writes go to the other replica of its shard,
	// reads too; back, it fetches what it missed.
	cluster.Kill(1)
	write(2, 100, 200)
	current(200, 200)
	phase("written and read with a replica killed")
	if err := cluster.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	phase("replica restarted")
	var perServer []uint64
	// A fetch the kill interrupted waits for its leftover temporary
	// directory to expire (chserver's temporary_directories_lifetime,
	// 30 s) and for the table's cleanup, every 30-40 s: about a minute
	// here, whatever the load.
	testenv.CheckFor(t, 3*time.Minute, func() error {
		perServer = perServer[:0]
		for _, addr := range cluster.Addrs() {
			one := testenv.Open(t, service.ClickHouse{Addr: addr, Database: cfg.Database, User: "default"}, readmodel.NoCreate())
			var n uint64
			if err := one.QueryRow(ctx, "SELECT count() FROM drift_evidence_local FINAL WHERE version = 2").Scan(&n); err != nil {
				return err
			}
			perServer = append(perServer, n)
		}
		if perServer[0] != perServer[1] || perServer[2] != perServer[3] || perServer[0]+perServer[2] != 200 || perServer[0] == 0 || perServer[2] == 0 {
			return fmt.Errorf("current rows per server (s1r1, s1r2, s2r1, s2r2) %v: want each shard's replicas equal, both shards used, 200 in all", perServer)
		}
		return nil
	})
	phase("replica caught up")
	t.Logf("current rows per server (s1r1, s1r2, s2r1, s2r2): %v", perServer)
}
