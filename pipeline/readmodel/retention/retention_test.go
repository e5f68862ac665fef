package retention_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/retention"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// insert inserts rows (each a list of SQL expressions) into the columns
// cols of table, as INSERT ... SELECT: the native protocol has the client
// send the data of an INSERT ... VALUES.
func insert(t *testing.T, conn driver.Conn, table, cols string, rows ...string) {
	t.Helper()
	for _, r := range rows {
		q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s", table, cols, r)
		if err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func count(t *testing.T, conn driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestApply fills the four tables over fourteen months and applies a
// policy: whole months past retention go, the month holding an open
// finding's newest history row, an open mismatch's rated line or an
// unbalanced window stays, and so does everything younger.
func TestApply(t *testing.T) {
	conn, _ := testenv.ClickHouseConn(t)
	testApply(t, conn, "")
}

// TestApplyCluster is TestApply on the read model in cluster mode: the
// rows spread over two shards of two replicas, the months are found
// through the Distributed tables and dropped in every shard's replicated
// table.
func TestApplyCluster(t *testing.T) {
	cfg, _ := testenv.ClickHouseCluster(t)
	testApply(t, testenv.Open(t, cfg), cfg.Cluster)
}

func testApply(t *testing.T, conn driver.Conn, cluster string) {
	ctx := context.Background()
	open, resolved := string(contract.StatusOpen), string(contract.StatusResolved)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(t time.Time) string { return "toDateTime('" + t.Format("2006-01-02 15:04:05") + "')" }
	month := func(back int) string { return at(now.AddDate(0, -back, 0)) }

	// drift_history: one row a month for a resolved finding (months 0..13
	// back); an open finding opened 10 months back (its newest row) and one
	// whose older row is 12 months back but newest is recent.
	for back := 0; back < 14; back++ {
		insert(t, conn, "drift_history", "evidence_id, version, at", fmt.Sprintf("'ev-resolved', %d, %s", 100-back, month(back)))
	}
	insert(t, conn, "drift_history", "evidence_id, version, at", "'ev-open-old', 1, "+month(10),
		"'ev-open-new', 1, "+month(12), "'ev-open-new', 2, "+month(1))
	insert(t, conn, "drift_evidence", "evidence_id, status, version",
		"'ev-resolved', '"+resolved+"', 1", "'ev-open-old', '"+open+"', 1", "'ev-open-new', '"+open+"', 1")

	// rated_usage: a line a month; the one 9 months back is named by an
	// open mismatch, the one 11 months back by a resolved one.
	for back := 0; back < 14; back++ {
		insert(t, conn, "rated_usage", "usage_id, tenant_id, day", fmt.Sprintf("'u-%d', 't', toDate(%s)", back, month(back)))
	}
	insert(t, conn, "billing_mismatch", "mismatch_id, usage_id, status, version",
		"'m-9', 'u-9', '"+open+"', 1", "'m-11', 'u-11', '"+resolved+"', 1")

	// billing_window: a balanced window a month, and an unbalanced one 8
	// months back; a window 7 months back unbalanced first, balanced later.
	for back := 0; back < 14; back++ {
		insert(t, conn, "billing_window", "tenant_id, product_id, window_start, balanced, version", "'t', '', "+month(back)+", 1, 1")
	}
	insert(t, conn, "billing_window", "tenant_id, product_id, window_start, balanced, version",
		"'t', 'p', "+month(8)+", 0, 1", "'t', 'q', "+month(7)+", 0, 1", "'t', 'q', "+month(7)+", 1, 2")

	// consumer_progress: a live key with an old superseded row, a dead key.
	insert(t, conn, "consumer_progress", "consumer, partition, updated_at, version",
		"'g', 0, "+month(3)+", 1", "'g', 0, "+at(now.Add(-time.Hour))+", 2", "'g', 1, "+month(3)+", 1", `'old\'group', 0, `+month(3)+", 1")

	policy := retention.Policy{History: 180 * retention.Day, Rated: 180 * retention.Day, Windows: 180 * retention.Day, Progress: 30 * retention.Day, Cluster: cluster}
	d, err := retention.Apply(ctx, conn, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	ym := func(back ...int) []uint32 { return monthsBack(now, back...) }
	// 180 days before 2026-11-24 is 2026-05-28: May 2026 (6 back) is not
	// past yet; April and earlier (7..13 back) are.
	want := map[string][]uint32{
		"drift_history":  ym(13, 12, 11, 9, 8, 7),  // 10 back holds ev-open-old's newest row
		"rated_usage":    ym(13, 12, 11, 10, 8, 7), // 9 back holds u-9, open
		"billing_window": ym(13, 12, 11, 10, 9, 7), // 8 back is unbalanced; 7 back was, then balanced
	}
	if !reflect.DeepEqual(d.Partitions, want) {
		t.Errorf("dropped %v\nwant    %v", d.Partitions, want)
	}
	if wantKept := map[string][]uint32{"drift_history": ym(10), "rated_usage": ym(9), "billing_window": ym(8)}; !reflect.DeepEqual(d.Kept, wantKept) {
		t.Errorf("kept %v, want %v", d.Kept, wantKept)
	}
	if d.ProgressKeys != 2 {
		t.Errorf("deleted %d consumer_progress keys, want 2 (g/1 and the old group)", d.ProgressKeys)
	}

	// What stays is readable as before.
	for q, n := range map[string]uint64{
		"SELECT count() FROM drift_history WHERE evidence_id = 'ev-open-old'":                1,
		"SELECT count() FROM drift_history WHERE evidence_id = 'ev-open-new'":                1, // its row 12 back went; the newest stays
		"SELECT count() FROM drift_history WHERE evidence_id = 'ev-resolved'":                8, // 0..6 back, and 10 back kept for ev-open-old
		"SELECT count() FROM drift_evidence FINAL":                                           3,
		"SELECT count() FROM rated_usage":                                                    8,
		"SELECT count() FROM billing_mismatch FINAL":                                         2,
		"SELECT count() FROM billing_window FINAL":                                           9, // 0..6 back, and both windows 8 back
		"SELECT count() FROM consumer_progress FINAL WHERE consumer = 'g' AND partition = 0": 1,
		"SELECT count() FROM consumer_progress WHERE partition = 1 OR consumer != 'g'":       0,
	} {
		testenv.CheckFor(t, 2*time.Minute, func() error { // mutations apply in the background; on a cluster, through every replica
			if got := count(t, conn, q); got != n {
				return fmt.Errorf("%s: %d, want %d", q, got, n)
			}
			return nil
		})
	}

	// A second pass finds nothing more to do.
	d, err = retention.Apply(ctx, conn, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Partitions) != 0 || d.ProgressKeys != 0 {
		t.Errorf("second pass dropped %v and %d keys", d.Partitions, d.ProgressKeys)
	}
	// A policy of zero keeps everything.
	if d, err := retention.Apply(ctx, conn, retention.Policy{}, now.AddDate(10, 0, 0)); err != nil || len(d.Partitions) != 0 {
		t.Errorf("zero policy: %v, %v", d, err)
	}
}

func TestDefaultPolicyProdKeepsLongest(t *testing.T) {
	prod := retention.DefaultPolicy(contract.EnvProd)
	for _, env := range []string{contract.EnvLocalParity, contract.EnvDev} {
		p := retention.DefaultPolicy(env)
		if p.History > prod.History || p.Rated > prod.Rated || p.Windows > prod.Windows || p.History <= 0 || p.Rated <= 0 ||
			p.Lifecycle > prod.Lifecycle || p.SyncDebt > prod.SyncDebt || p.Lifecycle <= 0 || p.SyncDebt <= 0 {
			t.Errorf("%s keeps %+v, prod %+v", env, p, prod)
		}
	}
}

func TestOverride(t *testing.T) {
	d := retention.DefaultPolicy(contract.EnvDev)
	got := d.Override(retention.Policy{History: retention.Day, Rated: -1})
	want := retention.Policy{History: retention.Day, Rated: -1, Windows: d.Windows, Progress: d.Progress, Lifecycle: d.Lifecycle, SyncDebt: d.SyncDebt}
	if got != want {
		t.Errorf("override: %+v, want %+v", got, want)
	}
}

// TestApplyFleetTables: node_lifecycle_history drops whole months past
// retention but keeps the month of each node's newest transition;
// sync_debt_minute, a timeline, keeps nothing past retention.
func TestApplyFleetTables(t *testing.T) {
	conn, _ := testenv.ClickHouseConn(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	month := func(back int) string {
		return "toDateTime('" + now.AddDate(0, -back, 0).Format("2006-01-02 15:04:05") + "')"
	}
	for back := 0; back < 14; back++ {
		insert(t, conn, "node_lifecycle_history", "node_id, seq, at", fmt.Sprintf("'n-live', %d, %s", 14-back, month(back)))
		insert(t, conn, "sync_debt_minute", "domain_id, relay_id, minute, version", fmt.Sprintf("'d', 'r', %s, 1", month(back)))
	}
	// A node whose newest transition is 10 months back, and one whose
	// older transition is 12 months back but newest recent.
	insert(t, conn, "node_lifecycle_history", "node_id, seq, at", "'n-quiet', 1, "+month(11), "'n-quiet', 2, "+month(10),
		"'n-moved', 1, "+month(12), "'n-moved', 2, "+month(1))
	policy := retention.Policy{Lifecycle: 180 * retention.Day, SyncDebt: 180 * retention.Day}
	d, err := retention.Apply(ctx, conn, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	ym := func(back ...int) []uint32 { return monthsBack(now, back...) }
	want := map[string][]uint32{
		"node_lifecycle_history": ym(13, 12, 11, 9, 8, 7), // 10 back holds n-quiet's newest transition
		"sync_debt_minute":       ym(13, 12, 11, 10, 9, 8, 7),
	}
	if !reflect.DeepEqual(d.Partitions, want) {
		t.Errorf("dropped %v\nwant    %v", d.Partitions, want)
	}
	if wantKept := map[string][]uint32{"node_lifecycle_history": ym(10)}; !reflect.DeepEqual(d.Kept, wantKept) {
		t.Errorf("kept %v, want %v", d.Kept, wantKept)
	}
	testenv.CheckFor(t, 2*time.Minute, func() error {
		for q, n := range map[string]uint64{
			"SELECT count() FROM node_lifecycle_history WHERE node_id = 'n-quiet'": 1,
			"SELECT count() FROM node_lifecycle_history WHERE node_id = 'n-moved'": 1,
			"SELECT count() FROM sync_debt_minute":                                 7,
		} {
			if got := count(t, conn, q); got != n {
				return fmt.Errorf("%s: %d, want %d", q, got, n)
			}
		}
		return nil
	})
}

// monthsBack returns the YYYYMM partitions of the months that lie each of
// back months before now.
func monthsBack(now time.Time, back ...int) []uint32 {
	var out []uint32
	for _, b := range back {
		at := now.AddDate(0, -b, 0)
		out = append(out, uint32(at.Year()*100+int(at.Month())))
	}
	return out
}
