package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type fixture struct {
	t       *testing.T
	cl      *kgo.Client
	names   contract.Topics
	brokers []string
	ch      driver.Conn
	seq     map[string]uint64
	extra   int // usage rated and ledgered by tickPartition
}

func newFixture(t *testing.T) *fixture {
	e := streamtest.NewEnv(t, 3)
	return &fixture{t: t, cl: e.Client, names: e.Names, brokers: e.Brokers, ch: e.CH, seq: map[string]uint64{}}
}

// send produces one valid event with the standard partitioner.
func (f *fixture) send(typ, producer string, at time.Time, payload any) {
	f.t.Helper()
	f.seq[producer]++
	rec := streamtest.Event(f.t, f.names, typ, producer, f.seq[producer], at, payload)
	if err := f.cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) usage(id, meterID, unit string, at time.Time) {
	u := usage(id, meterID, unit)
	u.WindowStart, u.WindowEnd = at.Add(-time.Minute), at
	f.send(contract.TypeUsageRecorded, "gpu-meter", at, u)
}

func (f *fixture) rated(id, meterID, amount string, at time.Time) {
	r := rated(id, meterID, amount)
	r.RatedAt = at.Add(time.Second)
	f.send(contract.TypeBillingRated, "rater", at, r)
}

func (f *fixture) ledger(id, meterID, amount string, at time.Time) {
	l := ledger(id, amount, "USD")
	l.MeteringID, l.PostedAt = meterID, at
	f.send(contract.TypeLedgerEntry, "ledger", at, l)
}

// options returns the options of a reconciler of group in the fixture.
func (f *fixture) options(group string) Options {
	return Options{StageOptions: stream.StageOptions{Brokers: f.brokers, Group: group, Topics: f.names,
		Logger: slog.New(slog.DiscardHandler)}, RoundOptions: stream.RoundOptions{FlushInterval: 100 * time.Millisecond},
		Prices: testPrices(f.t)}
}

func (f *fixture) start(group string, with ...func(*Options)) (stop func()) {
	f.t.Helper()
	opts := f.options(group)
	for _, w := range with {
		w(&opts)
	}
	return streamtest.Start(f.t, "reconciler", func(ctx context.Context) (*Reconciler, error) { return New(ctx, opts, NewClickHouse(f.ch)) })
}

// rows returns the current billing_mismatch rows, one line each.
func (f *fixture) rows() ([]string, error) {
	rows, err := f.ch.Query(context.Background(), `SELECT mismatch_id, kind, usage_id, metering_id, quantity,
 rated_amount, ledger_amount, currency, status, first_seen_at FROM billing_mismatch FINAL ORDER BY mismatch_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, kind, usageID, meterID, qty, rated, ledger, cur, status string
		var first time.Time
		if err := rows.Scan(&id, &kind, &usageID, &meterID, &qty, &rated, &ledger, &cur, &status, &first); err != nil {
			return nil, err
		}
		out = append(out, strings.Join([]string{id, kind, usageID, meterID, qty, rated, ledger, cur, status,
			first.UTC().Format("15:04:05")}, " "))
	}
	return out, rows.Err()
}

func (f *fixture) wantRows(want ...string) {
	f.t.Helper()
	sort.Strings(want)
	testenv.CheckFor(f.t, 30*time.Second, func() error {
		got, err := f.rows()
		if err != nil {
			return err
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			return fmt.Errorf("billing_mismatch rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return nil
	})
}

// TestThrottledReconciler: with merge queues of one record and fetches
// of one batch, streams are paused and resumed over and over; with
// regular rounds of one event, the reconciler catches up in longer
// rounds; and the rows are those of a plain run (pausing moves fetches,
// never records, and rounds move only when rows are written).
func TestThrottledReconciler(t *testing.T) {
	f := newFixture(t)
	f.usage("ok", "m-ok", "gpu_hour", t0)
	f.usage("wrong", "m-wrong", "gpu_hour", t0)
	f.usage("dup", "m-ok", "gpu_hour", t0.Add(time.Second))
	f.usage("bad", "m-bad", "gpu_minute", t0)
	for _, id := range []string{"ok", "wrong"} {
		f.rated(id, "m-"+id, "4.90", t0)
	}
	f.ledger("ok", "m-ok", "4.90", t0.Add(2*time.Minute))
	f.ledger("wrong", "m-wrong", "4.91", t0.Add(2*time.Minute))
	reg := prometheus.NewRegistry()
	stop := f.start("billing-throttled", func(o *Options) {
		o.QueueRecords, o.Registerer = 1, reg
		o.FlushInterval, o.FlushEvents = time.Millisecond, 1
		o.CatchUpInterval, o.CatchUpEvents = 2*time.Second, 1000
		o.ClientOpts = append(o.ClientOpts, kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1))
	})
	defer stop()
	f.wantRows(
		"amount_mismatch:wrong amount_mismatch wrong m-wrong 2.000000 4.90 4.91 USD open 10:02:00",
		"duplicate_usage:gpu-meter/m-ok duplicate_usage dup m-ok 2.000000   USD open 10:00:01",
		"unknown_unit:bad unknown_unit bad m-bad 2.000000    open 10:00:00",
	)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]float64{}
	for _, mf := range mfs {
		if m := mf.GetMetric(); len(m) == 1 && m[0].GetCounter() != nil {
			counted[mf.GetName()] = m[0].GetCounter().GetValue()
		}
	}
	for _, name := range []string{"driftline_billing_stream_pauses_total", "driftline_billing_catch_up_rounds_total"} {
		if counted[name] == 0 {
			t.Errorf("%s: none", name)
		}
	}
	// A catch-up over topics written before it started has no live tail:
	// in however small fetches, nothing is applied behind the merge order.
	if n, ok := counted["driftline_billing_late_records_total"]; !ok || n != 0 {
		t.Errorf("driftline_billing_late_records_total = %v (registered %v), want 0", n, ok)
	}
}

func TestReconcilerWritesExactMismatchRows(t *testing.T) {
	f := newFixture(t)
	// Rounds of two rows, everything in memory: the ticks below raise
	// more at once, and their partitions stay Behind over several rounds.
	defer func(n int) { maxRoundRows = n }(maxRoundRows)
	maxRoundRows = 2
	inMemory := func(o *Options) { o.StateMemory = -1 }
	stop := f.start("billing-test", inMemory)

	// ok: rated and ledgered in time. late: rated, ledgered after its
	// grace. noledger: rated, never ledgered. wrong: ledgered one cent
	// more. unrated: never rated. dup: a second usage_id for ok's key.
	// bad: unknown unit. old: retired unit.
	f.usage("ok", "m-ok", "gpu_hour", t0)
	f.usage("late", "m-late", "gpu_hour", t0)
	f.usage("noledger", "m-noledger", "gpu_hour", t0)
	f.usage("wrong", "m-wrong", "gpu_hour", t0)
	f.usage("unrated", "m-unrated", "gpu_hour", t0)
	f.usage("dup", "m-ok", "gpu_hour", t0.Add(time.Second))
	f.usage("bad", "m-bad", "gpu_minute", t0)
	f.usage("old", "m-old", "gpu_hour_legacy", t0)
	for _, id := range []string{"ok", "late", "noledger", "wrong"} {
		f.rated(id, "m-"+id, "4.90", t0)
	}
	f.ledger("ok", "m-ok", "4.90", t0.Add(2*time.Minute))
	f.ledger("wrong", "m-wrong", "4.91", t0.Add(2*time.Minute))
	f.wantRows(
		"amount_mismatch:wrong amount_mismatch wrong m-wrong 2.000000 4.90 4.91 USD open 10:02:00",
		"duplicate_usage:gpu-meter/m-ok duplicate_usage dup m-ok 2.000000   USD open 10:00:01",
		"unknown_unit:bad unknown_unit bad m-bad 2.000000    open 10:00:00",
		"unknown_unit:old unknown_unit old m-old 2.000000   USD open 10:00:00",
	)

	// Event time moves on (usage of later windows on every partition):
	// the graces pass.
	stop()
	stop = f.start("billing-test", inMemory) // restores from the committed offsets
	for i := range 6 {
		f.usage(fmt.Sprintf("tick-%d", i), fmt.Sprintf("m-tick-%d", i), "gpu_hour", t0.Add(16*time.Minute))
	}
	for i := range 6 {
		f.rated(fmt.Sprintf("tick-%d", i), fmt.Sprintf("m-tick-%d", i), "4.90", t0.Add(16*time.Minute))
		f.ledger(fmt.Sprintf("tick-%d", i), fmt.Sprintf("m-tick-%d", i), "4.90", t0.Add(16*time.Minute))
	}
	// Which partitions the ticks reach depends on the hash; make sure
	// every partition's event time moves on.
	for p := int32(0); p < 3; p++ {
		f.tickPartition(p, t0.Add(16*time.Minute))
	}
	base := []string{
		"amount_mismatch:wrong amount_mismatch wrong m-wrong 2.000000 4.90 4.91 USD open 10:02:00",
		"duplicate_usage:gpu-meter/m-ok duplicate_usage dup m-ok 2.000000   USD open 10:00:01",
		"unknown_unit:bad unknown_unit bad m-bad 2.000000    open 10:00:00",
		"unknown_unit:old unknown_unit old m-old 2.000000   USD open 10:00:00",
	}
	f.wantRows(append(base,
		"rated_not_ledgered:late rated_not_ledgered late m-late 2.000000 4.90  USD open 10:15:00",
		"rated_not_ledgered:noledger rated_not_ledgered noledger m-noledger 2.000000 4.90  USD open 10:15:00",
		"usage_not_rated:unrated usage_not_rated unrated m-unrated 2.000000   USD open 10:05:00",
	)...)

	// After another restart the late ledger entry and rated line resolve
	// theirs; nothing else changes.
	stop()
	stop = f.start("billing-test", inMemory)
	defer stop()
	f.ledger("late", "m-late", "4.90", t0.Add(16*time.Minute))
	f.rated("unrated", "m-unrated", "4.90", t0)
	f.wantRows(append(base,
		"rated_not_ledgered:late rated_not_ledgered late m-late 2.000000 4.90 4.90 USD resolved 10:15:00",
		"rated_not_ledgered:noledger rated_not_ledgered noledger m-noledger 2.000000 4.90  USD open 10:15:00",
		// Rated after its ledger grace had passed: due at once.
		"rated_not_ledgered:unrated rated_not_ledgered unrated m-unrated 2.000000 4.90  USD open 10:15:00",
		"usage_not_rated:unrated usage_not_rated unrated m-unrated 2.000000 4.90  USD resolved 10:05:00",
	)...)

	// rated_usage holds every rated line exactly once.
	testenv.CheckFor(t, 30*time.Second, func() error {
		var n uint64
		var sum string
		if err := f.ch.QueryRow(context.Background(), "SELECT count(), toString(sum(toDecimal64(amount, 6))) FROM rated_usage FINAL").Scan(&n, &sum); err != nil {
			return err
		}
		if want := uint64(4 + 6 + f.extra + 1); n != want {
			return fmt.Errorf("rated_usage has %d lines (sum %s), want %d", n, sum, want)
		}
		return nil
	})

	// The conservation windows account for every usage_id exactly once.
	testenv.CheckFor(t, 30*time.Second, func() error {
		var accepted, rejected, notRated, rated, ledgered, mismatch, notLedgered, entries, unexplained uint64
		var ratedAmount string
		err := f.ch.QueryRow(context.Background(), `SELECT sum(accepted), sum(rejected), sum(not_rated), sum(rated),
 sum(ledgered), sum(amount_mismatch), sum(not_ledgered), sum(ledger_entries), sum(unexplained),
 toString(sum(toDecimal64(rated_amount, 6))) FROM billing_window FINAL`).Scan(
			&accepted, &rejected, &notRated, &rated, &ledgered, &mismatch, &notLedgered, &entries, &unexplained, &ratedAmount)
		if err != nil {
			return err
		}
		extra := uint64(f.extra)
		got := fmt.Sprint(accepted, rejected, notRated, rated, ledgered, mismatch, notLedgered, entries, unexplained, ratedAmount)
		want := fmt.Sprint(8+6+extra, 3, 0, 4+6+extra+1, 2+6+extra, 1, 2, 3+6+extra, 0, fmt.Sprintf("%d.%d00000", 49*(11+extra)/10, 49*(11+extra)%10))
		if got != want {
			return fmt.Errorf("billing_window totals %s, want %s", got, want)
		}
		return nil
	})
}

// tickPartition writes one rated-and-ledgered usage whose key lands on
// partition p, at event time at.
func (f *fixture) tickPartition(p int32, at time.Time) {
	f.t.Helper()
	for i := 0; ; i++ {
		id := fmt.Sprintf("p%d-%d", p, i)
		if contract.Partition([]byte("gpu-meter/m-"+id), 3) != p {
			continue
		}
		f.usage(id, "m-"+id, "gpu_hour", at)
		f.rated(id, "m-"+id, "4.90", at)
		f.ledger(id, "m-"+id, "4.90", at)
		f.extra++
		return
	}
}
