package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// TestClusterFindingsMatchGroundTruth is the end-to-end test against the
// read model in cluster mode: two shards of two ClickHouse 18.16 replicas
// and ZooKeeper (testenv.ClickHouseCluster), every service run with
// -clickhouse.cluster and the four servers as its addresses. While the
// pipeline writes, the first replica of the first shard (the first
// address every service tries, and the replica its shard's writes go to)
// is killed with SIGKILL and started again a few seconds later. The
// findings the query API answers must still be the generator's truth,
// the billing mismatches and rated totals exact, and no key may have rows
// on two shards (FINAL through the Distributed tables would keep both).
func TestClusterFindingsMatchGroundTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	ch, cluster := testenv.ClickHouseCluster(t)
	s := startStack(t, ctx, stack.Options{
		Dir:                t.TempDir(),
		BinDir:             buildBinaries(t),
		Partitions:         crashPartitions,
		Env:                []string{pricebookEnv(t)},
		ExternalClickHouse: true,
		ClickHouseAddr:     ch.Addr,
		Database:           ch.Database,
		ClickHouseCluster:  ch.Cluster,
	})

	cfg := fleet.DefaultConfig()
	cfg.Seed = 7
	cfg.Ledger.Enabled = true
	gen, truth := newGenerator(t, cfg)

	// The kill comes once the joiner has written findings: mid-stream.
	// Progress is read from the second shard, which stays up.
	other := ch
	other.Addr = cluster.Addrs()[2]
	watch := testenv.Open(t, other, readmodel.NoCreate())
	killed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			var n uint64
			if err := watch.QueryRow(ctx, "SELECT count() FROM drift_evidence_local").Scan(&n); err == nil && n > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cluster.Kill(0)
		t.Logf("killed ClickHouse s1r1 (SIGKILL) mid-stream")
		time.Sleep(5 * time.Second)
		killed <- cluster.Restart(ctx, 0)
	}()

	stats, err := fleet.Feed(ctx, s.IngestURL(), service.DefaultLocalAPIKey, gen, fleet.FeedOptions{})
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	if stats.Rejected != 0 || stats.Accepted+stats.Duplicate != stats.Events {
		t.Fatalf("feed stats %+v: rejections, or accepted+duplicate != events", stats)
	}
	select {
	case err := <-killed:
		if err != nil {
			t.Fatalf("restart the killed replica: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the replica was never killed and restarted")
	}
	waitGroupCaughtUp(t, s.BrokerAddr(), "driftline-joiner", 4*time.Minute)

	qc := &client.Client{BaseURL: s.QueryURL(), APIKey: service.DefaultLocalAPIKey}
	testenv.CheckFor(t, 2*time.Minute, func() error {
		got, err := qc.DriftAll(ctx, url.Values{"status": {"all"}, "limit": {"1000"}})
		if err != nil {
			return err
		}
		return compareFindings(got, truth)
	})
	t.Logf("fed %d events through a replica's crash; %d findings match the ground truth exactly", stats.Events, len(truth.Findings))
	checkBilling(t, s, truth)

	// The summaries read through the Distributed tables agree too.
	checkHeatmap(t, ctx, qc, truth)
	if st, err := qc.Status(ctx); err != nil || st.LastRun == nil {
		t.Errorf("status through the cluster: %+v, %v", st, err)
	}

	// The crash is seen by the writers: each logs the writes it retried.
	for _, name := range []string{stack.NameJoiner, stack.NameRater} {
		b, err := os.ReadFile(s.LogPath(name))
		if err != nil {
			t.Fatal(err)
		}
		retried := 0
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				retried++
			}
		}
		t.Logf("%s logged %d warnings and errors while the replica was down", name, retried)
	}

	conn := testenv.Open(t, ch)
	for _, c := range []struct{ table, key string }{
		{"drift_evidence", "evidence_id"},
		{"node_agent_status", "node_id"},
		{"billing_mismatch", "mismatch_id"},
		{"rated_usage", "usage_id"},
	} {
		var rows, keys uint64
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(), uniqExact(%s) FROM %s FINAL", c.key, c.table)).Scan(&rows, &keys); err != nil {
			t.Fatal(err)
		}
		if rows != keys {
			t.Errorf("%s: %d current rows for %d keys: a key has rows on two shards", c.table, rows, keys)
		}
	}
}
