package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
)

// crashSink writes through to ClickHouse and, after the crashAfter-th
// write of an incarnation, dies: the batch is written but the write reports failure,
// and so does every later write, so the offsets of the written batch are
// never committed, as a kill -9 between the write and the commit leaves
// them. The test then stops the reconciler.
type crashSink struct {
	sink       Sink
	mu         sync.Mutex
	writes     int // of this incarnation
	total      int
	crashAfter int
	dead       bool
	crashed    chan struct{}
}

var errKilled = errors.New("killed after the write")

func (c *crashSink) Write(ctx context.Context, b *Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errKilled
	}
	if err := c.sink.Write(ctx, b); err != nil {
		return err
	}
	c.writes++
	c.total++
	if c.writes == c.crashAfter {
		c.dead = true
		close(c.crashed)
		return errKilled
	}
	return nil
}

// revive makes the sink write again, for the next incarnation.
func (c *crashSink) revive() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead, c.writes = false, 0
	c.crashed = make(chan struct{})
	return c.crashed
}

// produceBillingHistory writes three hours of usage of three tenants with
// their rated lines and postings, and every anomaly: usage never rated,
// rated lines never posted, postings of another amount, rated lines
// without usage, postings without rated line, duplicate usage, unknown
// units and usage corrected under its usage_id (conflicting usage).
func (f *fixture) produceBillingHistory() {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 400 {
		at := t0.Add(time.Duration(i) * 27 * time.Second)
		id := fmt.Sprintf("h%03d", i)
		meter := "m-" + id
		tenant := fmt.Sprintf("t-%d", i%3+1)
		unit := "gpu_hour"
		roll := rng.IntN(100)
		if roll == 0 {
			unit = "gpu_minute"
		}
		u := usage(id, meter, unit)
		u.TenantID, u.WindowStart, u.WindowEnd = tenant, at.Add(-time.Minute), at
		if roll != 1 { // 1: a rated line without usage
			f.send(contract.TypeUsageRecorded, "gpu-meter", at, u)
		}
		if roll == 2 { // a duplicate usage_id for the same key
			d := *u
			d.UsageID = id + "-dup"
			f.send(contract.TypeUsageRecorded, "gpu-meter", at.Add(time.Second), &d)
		}
		if roll == 4 { // the usage again in a new envelope, then corrected under its usage_id
			f.send(contract.TypeUsageRecorded, "gpu-meter", at.Add(time.Second), u)
			c := *u
			c.Quantity = "2.500000"
			f.send(contract.TypeUsageRecorded, "gpu-meter", at.Add(2*time.Second), &c)
		}
		if roll == 0 || roll == 3 { // unknown unit, or never rated
			continue
		}
		amount := fmt.Sprintf("%d.%02d", 1+i%7, i%100)
		r := rated(id, meter, amount)
		r.TenantID, r.RatedAt = tenant, at
		f.send(contract.TypeBillingRated, "rater", at, r)
		switch {
		case roll < 8: // never posted
		case roll < 11: // posted one cent more
			f.ledger(id, meter, amount+"1", at.Add(5*time.Minute))
		default:
			f.ledger(id, meter, amount, at.Add(5*time.Minute))
		}
		if roll == 12 { // a posting for usage nobody reported
			f.ledger(id+"-stray", meter+"-stray", "0.50", at.Add(6*time.Minute))
		}
	}
}

// settled waits until group has committed the end offset of every billing
// topic partition.
func (f *fixture) settled(group string) {
	f.t.Helper()
	adm := kadm.NewClient(f.cl)
	testenv.CheckFor(f.t, 60*time.Second, func() error {
		ctx := context.Background()
		ends, err := adm.ListEndOffsets(ctx, f.names.Billing()...)
		if err != nil {
			return err
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		var behind []string
		ends.Each(func(e kadm.ListedOffset) {
			c, ok := committed.Lookup(e.Topic, e.Partition)
			if !ok || c.At < e.Offset {
				behind = append(behind, fmt.Sprintf("%s/%d", e.Topic, e.Partition))
			}
		})
		if len(behind) > 0 {
			return fmt.Errorf("group %s behind on %v", group, behind)
		}
		return nil
	})
}

// dump returns the current rows of the billing tables, one line each,
// without the wall-clock updated_at.
func dump(t *testing.T, conn driver.Conn) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for table, q := range map[string]string{
		"billing_mismatch": `SELECT mismatch_id, kind, usage_id, metering_source, metering_id, tenant_id, product_id, unit_id,
 quantity, rated_amount, ledger_amount, currency, status, toString(first_seen_at), toString(last_seen_at), toString(version)
 FROM billing_mismatch FINAL ORDER BY mismatch_id`,
		"billing_window": `SELECT tenant_id, product_id, currency, toString(window_start), toString(partition), toString(accepted),
 toString(rejected), toString(rating_pending), toString(not_rated), toString(rated), rated_amount, toString(rated_without_usage),
 rated_without_usage_amount, toString(ledgered), ledgered_amount, toString(ledger_pending), ledger_pending_amount,
 toString(not_ledgered), not_ledgered_amount, toString(amount_mismatch), amount_mismatch_amount, amount_mismatch_ledger_amount,
 toString(ledger_entries), ledger_amount, toString(ledger_without_rated), ledger_without_rated_amount, toString(unexplained),
 toString(balanced), toString(last_event_at), toString(version)
 FROM billing_window FINAL ORDER BY tenant_id, product_id, currency, window_start, partition`,
		"rated_usage": `SELECT usage_id, metering_id, unit_id, quantity, amount, currency, tenant_id, product_id, toString(rated_at)
 FROM rated_usage FINAL ORDER BY tenant_id, usage_id`,
	} {
		rows, err := conn.Query(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		cols := len(rows.Columns())
		for rows.Next() {
			vals := make([]string, cols)
			dests := make([]any, cols)
			for i := range vals {
				dests[i] = &vals[i]
			}
			if err := rows.Scan(dests...); err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			out[table] = append(out[table], strings.Join(vals, " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		rows.Close()
	}
	return out
}

// TestCrashRestartWritesTheSameRows runs the reconciler once without
// interruption and once killed three times between a write and its offset
// commit and restarted, its states spilled: the billing tables end
// identical, row for row and version for version.
func TestCrashRestartWritesTheSameRows(t *testing.T) {
	f := newFixture(t)
	f.produceBillingHistory()
	opts := func(group string) Options {
		o := f.options(group)
		o.FlushInterval, o.FlushEvents, o.CatchUpEvents = 50*time.Millisecond, 37, 100
		// A round takes whole fetches: fetches of one batch each make the
		// many small rounds (and writes) the crashes fall between.
		o.ClientOpts = append(o.ClientOpts, kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1))
		// The uninterrupted run keeps its states in memory; the crashed
		// one spills every chunk it may at every record, so that its
		// restores and live rounds read them back from its scratch files.
		o.StateMemory = -1
		if group == "billing-crashed" {
			o.StateMemory = 1
		}
		return o
	}
	run := func(group string, sink Sink) func(killed bool) {
		ctx, cancel := context.WithCancel(context.Background())
		r, err := New(ctx, opts(group), sink)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		return func(killed bool) {
			cancel()
			err := <-done
			if killed != errors.Is(err, errKilled) {
				t.Errorf("reconciler run: %v", err)
			}
		}
	}

	// Uninterrupted.
	stop := run("billing-straight", NewClickHouse(f.ch))
	f.settled("billing-straight")
	stop(false)
	want := dump(t, f.ch)

	// Killed three times, each after the 2nd write of an incarnation, and
	// restarted; its rounds end at three rows, so that a record that
	// raises more holds its partition back (applyAll) across the writes
	// the crashes fall between.
	defer func(n int) { maxRoundRows = n }(maxRoundRows)
	maxRoundRows = 10
	conn, _ := testenv.ClickHouseConn(t)
	cs := &crashSink{sink: NewClickHouse(conn), crashAfter: 2}
	for crash := range 4 {
		if crash == 3 {
			cs.crashAfter = 0 // the last incarnation lives
		}
		crashed := cs.revive()
		stop := run("billing-crashed", cs)
		if crash < 3 {
			select {
			case <-crashed:
			case <-time.After(60 * time.Second):
				t.Fatalf("crash %d did not happen", crash+1)
			}
			stop(true)
			continue
		}
		f.settled("billing-crashed")
		stop(false)
	}
	got := dump(t, conn)

	kinds := map[string]int{}
	for _, m := range want["billing_mismatch"] {
		kinds[strings.Fields(m)[1]]++
	}
	for _, k := range contract.BillingKinds {
		if kinds[string(k)] == 0 {
			t.Errorf("no %s in the uninterrupted run: %v", k, kinds)
		}
	}
	for table, rows := range want {
		if strings.Join(got[table], "\n") != strings.Join(rows, "\n") {
			t.Errorf("%s differs after crashes (%d rows, want %d):\n%s", table, len(got[table]), len(rows), diff(rows, got[table]))
		}
	}
	t.Logf("%d mismatches by kind %v, %d window rows, %d rated lines; %d writes in the crashed runs",
		len(want["billing_mismatch"]), kinds, len(want["billing_window"]), len(want["rated_usage"]), cs.total)
}

// diff lists the lines only in a (-) or only in b (+), at most 20.
func diff(a, b []string) string {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			m[x] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for _, x := range a {
		if !inb[x] && len(out) < 20 {
			out = append(out, "- "+x)
		}
	}
	for _, x := range b {
		if !ina[x] && len(out) < 20 {
			out = append(out, "+ "+x)
		}
	}
	return strings.Join(out, "\n")
}
