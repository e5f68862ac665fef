package joiner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/joiner/dedupe"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/checkpoint"
	"github.com/driftline/driftline/pipeline/stream/snap"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// fixture produces contract events to the broker.
type fixture struct {
	t       *testing.T
	cl      *kgo.Client
	names   contract.Topics
	seq     map[string]uint64
	brokers []string
	ch      driver.Conn
	db      string
}

func newFixture(t *testing.T) *fixture {
	e := streamtest.NewEnv(t, 4)
	return &fixture{t: t, cl: e.Client, names: e.Names, seq: map[string]uint64{}, brokers: e.Brokers, ch: e.CH, db: e.Database}
}

// send produces one event; partition < 0 uses the standard partitioner.
func (f *fixture) send(typ, producer string, at time.Time, payload any, partition int32) {
	f.t.Helper()
	f.seq[producer]++
	r := streamtest.Event(f.t, f.names, typ, producer, f.seq[producer], at, payload)
	r.Partition = partition
	if partition >= 0 {
		f.produceTo(r)
		return
	}
	if err := f.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) produceTo(r *kgo.Record) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		f.t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

func record(id, state string) contract.PlatformRecord {
	return contract.PlatformRecord{RecordType: "app_instance", RecordID: "rec-" + id, RecordVersion: 1,
		ResourceFamily: contract.FamilyAppRuntime, ProductID: "apps", OwningDomain: "eu-west", DomainID: "d-eu",
		Provider: contract.ProviderAppRuntime, ProviderID: id, ExpectedState: state, ExpectedVersion: "sha256:aa"}
}

func observation(id, state string) contract.Observation {
	return contract.Observation{Provider: contract.ProviderAppRuntime, ProviderID: id, ResourceFamily: contract.FamilyAppRuntime,
		ObservedState: state, ObservedVersion: "sha256:aa"}
}

// options returns the options of a joiner of group in the fixture.
// The joiners restore at once (no SettleTime): a joiner with nothing new
// to apply has no lag before it has restored, and caughtUp would not
// wait for the restore the tests look at (stream's tests cover settling).
func (f *fixture) options(group string) Options {
	return Options{StageOptions: stream.StageOptions{Brokers: f.brokers, Group: group, Topics: f.names,
		Logger: slog.New(slog.DiscardHandler)}, RoundOptions: stream.RoundOptions{FlushInterval: 100 * time.Millisecond},
		SettleTime: -1}
}

// start runs a joiner until the returned stop is called; with changes
// its options.
func (f *fixture) start(group string, with ...func(*Options)) (stop func()) {
	f.t.Helper()
	opts := f.options(group)
	for _, w := range with {
		w(&opts)
	}
	return streamtest.Start(f.t, "joiner", func(ctx context.Context) (*Joiner, error) { return New(ctx, opts, sink.NewClickHouse(f.ch)) })
}

// caughtUp waits until the group has committed everything produced.
func (f *fixture) caughtUp(group string) {
	f.t.Helper()
	adm := kadm.NewClient(f.cl)
	testenv.CheckFor(f.t, 60*time.Second, func() error {
		lags, err := adm.Lag(context.Background(), group)
		if err != nil {
			return err
		}
		l := lags[group]
		if l.FetchErr != nil || l.DescribeErr != nil {
			return fmt.Errorf("lag: %v %v", l.FetchErr, l.DescribeErr)
		}
		var total int64
		for _, t := range f.names.Joined() {
			// A group that has not joined yet has no lag at all.
			if n := len(l.Lag[t]); n < 4 {
				return fmt.Errorf("%s: lag known for %d of 4 partitions", t, n)
			}
			for _, pl := range l.Lag[t] {
				if pl.Commit.At < 0 && pl.End.Offset > 0 {
					return fmt.Errorf("%s/%d not committed", t, pl.Partition)
				}
				total += pl.Lag
			}
		}
		if total != 0 {
			return fmt.Errorf("lag %d", total)
		}
		return nil
	})
}

// findings returns "evidence_id status retry_count" rows, sorted.
func (f *fixture) findings() []string {
	f.t.Helper()
	rows, err := f.ch.Query(context.Background(), "SELECT evidence_id, status, retry_count FROM drift_evidence FINAL ORDER BY evidence_id")
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, status string
		var retry uint32
		if err := rows.Scan(&id, &status, &retry); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %d", id, status, retry))
	}
	sort.Strings(out)
	return out
}

// scenario produces the records and rounds of observations (with scan
// markers fanned out to every partition) of the restart tests.
type scenario struct{ f *fixture }

func (sc scenario) records() {
	f := sc.f
	for _, id := range []string{"ok", "missing", "stale", "fixed"} {
		f.send(contract.TypePlatformRecord, "platform", t0.Add(-2*time.Minute), record(id, "running"), -1)
	}
	f.send(contract.TypePlatformRecord, "platform", t0.Add(-2*time.Minute), record("released", "released"), -1)
}

func (sc scenario) round(r int) {
	f := sc.f
	at := t0.Add(time.Duration(r) * 6 * time.Minute)
	f.send(contract.TypeProviderObservation, "scanner", at.Add(time.Second), observation("ok", "running"), -1)
	f.send(contract.TypeProviderObservation, "scanner", at.Add(2*time.Second), observation("stale", "stopped"), -1)
	f.send(contract.TypeProviderObservation, "scanner", at.Add(3*time.Second), observation("orphan", "running"), -1)
	f.send(contract.TypeProviderObservation, "scanner", at.Add(4*time.Second), observation("released", "running"), -1)
	state := "running"
	if r == 0 {
		state = "stopped"
	}
	f.send(contract.TypeProviderObservation, "scanner", at.Add(5*time.Second), observation("fixed", state), -1)
	for p := int32(0); p < 4; p++ { // the gateway's fan-out of the scan marker
		f.send(contract.TypeScanCompleted, fmt.Sprintf("scanner-marker-%d", p), at.Add(20*time.Second),
			contract.ScanCompleted{Provider: contract.ProviderAppRuntime, ScanID: fmt.Sprint(r), ScanStartedAt: at}, p)
	}
}

// Watermarks are per partition, so when an orphan's grace ends (and with
// it its retry_count) depends on what shares its partition.
var scenarioWant = []string{
	"missing_provider_resource:app_runtime/missing open 2",
	"orphan_provider_resource:app_runtime/orphan open 1",
	"orphan_provider_resource:app_runtime/released open 2",
	"stale_lifecycle_state:app_runtime/fixed resolved 0",
	"stale_lifecycle_state:app_runtime/stale open 2",
}

func (f *fixture) wantFindings(want []string) {
	f.t.Helper()
	if got := f.findings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJoinerEndToEndWithRestart(t *testing.T) {
	f := newFixture(t)
	sc := scenario{f}
	const group = "joiner-test"
	sc.records()
	stop := f.start(group)
	sc.round(0)
	f.caughtUp(group)
	stop() // a clean restart in the middle of the stream
	sc.round(1)
	stop = f.start(group)
	sc.round(2)
	f.caughtUp(group)
	stop()
	f.wantFindings(scenarioWant)

	// Replaying the same topics into empty tables with a new group yields
	// the same findings.
	if err := f.ch.Exec(context.Background(), "TRUNCATE TABLE drift_evidence"); err != nil {
		t.Fatal(err)
	}
	// This joiner paces the collector after its rounds (Options.GC): a
	// headroom far above its live heap sets the pacer's largest target.
	oldGC := debug.SetGCPercent(100)
	defer debug.SetGCPercent(oldGC)
	stop = f.start("joiner-replay", func(o *Options) { o.GC = &service.GCPacer{Headroom: 1 << 40, Min: 30, Max: 40} })
	f.caughtUp("joiner-replay")
	stop()
	f.wantFindings(scenarioWant)
	if gc := debug.SetGCPercent(oldGC); gc != 40 {
		t.Errorf("GOGC %d after a paced joiner's rounds, want 40", gc)
	}
}

// TestThrottledReplay: a joiner replays the whole scenario with a merge
// queue of one record per stream, fetches of one batch and regular rounds
// of two events: the streams that run ahead of the others are paused and
// resumed over and over, the joiner catches up in longer rounds, and the
// findings are the same (pausing moves fetches, never records; rounds move
// only when rows are written). No backlog is left at the end.
func TestThrottledReplay(t *testing.T) {
	f := newFixture(t)
	sc := scenario{f}
	sc.records()
	for r := range 3 {
		sc.round(r)
	}
	reg := prometheus.NewRegistry()
	stop := f.start("joiner-throttled", func(o *Options) {
		o.QueueRecords, o.Registerer = 1, reg
		o.FlushInterval, o.FlushEvents = time.Millisecond, 2
		o.CatchUpInterval, o.CatchUpEvents = 2*time.Second, 1000
		// Fetches of one batch (one event here), so the merge waits for
		// streams and the others queue up, and the joiner learns it is
		// behind over many polls.
		o.ClientOpts = append(o.ClientOpts, kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1))
	})
	f.caughtUp("joiner-throttled")
	stop()
	for _, name := range []string{"driftline_joiner_stream_pauses_total", "driftline_joiner_catch_up_rounds_total"} {
		if n := counter(t, reg, name); n == 0 {
			t.Errorf("%s: none", name)
		}
	}
	// A catch-up over topics written before it started has no live tail:
	// in however small fetches, nothing is applied behind the merge order.
	if n := mustCounter(t, reg, "driftline_joiner_late_records_total"); n != 0 {
		t.Errorf("%v records applied behind the merge order in a catch-up", n)
	}
	if n := gauge(t, reg, "driftline_joiner_backlog_records"); n != 0 {
		t.Errorf("backlog %v after catching up", n)
	}
	f.wantFindings(scenarioWant)
}

// TestRestoreFromCheckpoint: a joiner that restarts restores every
// partition from the checkpoints of the previous run, replays none of the
// records before them, and ends with the same findings.
func TestRestoreFromCheckpoint(t *testing.T) {
	f := newFixture(t)
	sc := scenario{f}
	const group = "joiner-checkpoints"
	store := f.checkpoints()
	withCheckpoints := func(reg prometheus.Registerer) func(*Options) { return checkpointing(store, time.Millisecond, reg) }
	sc.records()
	first := prometheus.NewRegistry()
	stop := f.start(group, withCheckpoints(first))
	sc.round(0)
	f.caughtUp(group)
	stop() // waits for the checkpoint writes
	if n := counter(t, first, "driftline_joiner_checkpoint_errors_total"); n != 0 {
		t.Fatalf("%v checkpoint errors", n)
	}
	sc.round(1)
	second := prometheus.NewRegistry()
	stop = f.start(group, withCheckpoints(second))
	sc.round(2)
	f.caughtUp(group)
	stop()
	wantRestoredFromCheckpoints(t, second)
	f.wantFindings(scenarioWant)
}

// checkpoints returns a checkpoint store on the fixture's broker.
func (f *fixture) checkpoints() *checkpoint.Store {
	store, err := checkpoint.New(context.Background(), checkpoint.Options{Brokers: f.brokers, Partitions: 4, Create: true})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(store.Close)
	return store
}

// checkpointing sets a joiner's checkpoint store, interval (0: the
// default) and metrics registry.
func checkpointing(store *checkpoint.Store, interval time.Duration, reg prometheus.Registerer) func(*Options) {
	return func(o *Options) { o.Checkpoints, o.CheckpointInterval, o.Registerer = store, interval, reg }
}

// wantRestoredFromCheckpoints checks that the joiner of reg restored all
// 4 partitions from checkpoints covering everything committed.
func wantRestoredFromCheckpoints(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	if n := counter(t, reg, "driftline_joiner_restore_checkpoints_total"); n != 4 {
		t.Errorf("%v partitions restored from a checkpoint, want 4", n)
	}
	if n := counter(t, reg, "driftline_joiner_restore_events_total"); n != 0 {
		t.Errorf("restore replayed %v events; the checkpoints cover everything committed", n)
	}
}

// TestRestoreSkipsUnusableCheckpoint: the newest checkpoint of every
// partition is whole but of a snapshot version this joiner cannot decode
// (written by a newer release before a rollback). The restore counts it,
// falls back to the checkpoint before it and replays nothing, instead of
// replaying the partitions from their start.
func TestRestoreSkipsUnusableCheckpoint(t *testing.T) {
	f := newFixture(t)
	sc := scenario{f}
	const group = "joiner-unusable-checkpoint"
	store := f.checkpoints()
	sc.records()
	sc.round(0)
	stop := f.start(group, checkpointing(store, 0, nil))
	f.caughtUp(group)
	stop() // the final checkpoints cover everything committed
	newer := snap.Writer{}
	newer.Header("joiner.partition", snapshotVersion+1)
	newer.Varint(0)
	all := checkpoint.Cut{f.names.PlatformRecords: math.MaxInt64, f.names.Observations: math.MaxInt64, f.names.Telemetry: math.MaxInt64, f.names.Commands: math.MaxInt64}
	for p := range int32(4) {
		cp, ok, err := store.Load(context.Background(), group, p, all)
		if err == nil && !ok {
			err = errors.New("none")
		}
		if err != nil {
			t.Fatalf("checkpoint of partition %d: %v", p, err)
		}
		if err := store.Save(context.Background(), group, p, cp.Cut, newer.B); err != nil {
			t.Fatal(err)
		}
	}
	sc.round(1)
	sc.round(2)
	reg := prometheus.NewRegistry()
	stop = f.start(group, checkpointing(store, 0, reg))
	f.caughtUp(group)
	stop()
	if n := counter(t, reg, "driftline_joiner_checkpoint_errors_total"); n != 4 {
		t.Errorf("%v checkpoints counted unusable, want 4", n)
	}
	wantRestoredFromCheckpoints(t, reg)
	f.wantFindings(scenarioWant)
}

// TestCheckpointClock: a partition assigned with nothing committed starts
// its checkpoint clock at the assignment, so a new group's first rounds
// do not wait for checkpoints of everything they just read (the stop
// still takes one); a partition replayed from its start for want of a
// checkpoint is checkpointed at its first seal, so the next restore does
// not replay it again.
func TestCheckpointClock(t *testing.T) {
	f := newFixture(t)
	sc := scenario{f}
	store := f.checkpoints()
	withCheckpoints := func(reg prometheus.Registerer) func(*Options) { return checkpointing(store, time.Hour, reg) }
	snapshots := func(reg *prometheus.Registry) uint64 {
		m := metric(t, reg, "driftline_joiner_checkpoint_snapshot_seconds")
		if m == nil {
			return 0
		}
		return m.GetHistogram().GetSampleCount()
	}
	sc.records()
	sc.round(0)

	fresh := prometheus.NewRegistry()
	stop := f.start("joiner-clock-fresh", withCheckpoints(fresh))
	f.caughtUp("joiner-clock-fresh")
	if n := snapshots(fresh); n != 0 {
		t.Errorf("%d snapshots before an hour, with nothing committed at the assignment", n)
	}
	stop()
	if n := snapshots(fresh); n != 4 {
		t.Errorf("%d snapshots at the stop, want 4", n)
	}

	// Another group commits the same records without checkpoints; its
	// successor with checkpoints replays every partition from the start.
	const group = "joiner-clock-replayed"
	stop = f.start(group)
	f.caughtUp(group)
	stop()
	replayed := prometheus.NewRegistry()
	stop = f.start(group, withCheckpoints(replayed))
	sc.round(1)
	f.caughtUp(group)
	testenv.CheckFor(t, 10*time.Second, func() error {
		if n := snapshots(replayed); n != 4 {
			return fmt.Errorf("%d snapshots of the replayed partitions, want 4 at the first seal", n)
		}
		return nil
	})
	sc.round(2)
	f.caughtUp(group)
	stop()
	if n := counter(t, replayed, "driftline_joiner_restore_events_total"); n == 0 {
		t.Fatal("nothing replayed: the test does not cover a restore without a checkpoint")
	}
	f.wantFindings(scenarioWant)
}

// counter returns the value of the counter named name in reg (0 when it
// was never incremented).
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	if m := metric(t, reg, name); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}

// mustCounter returns the value of the counter named name in reg; the
// test fails when reg has none.
func mustCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return mustMetric(t, reg, name).GetCounter().GetValue()
}

// gauge returns the value of the gauge named name in reg; the test fails
// when reg has none.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return mustMetric(t, reg, name).GetGauge().GetValue()
}

func mustMetric(t *testing.T, reg *prometheus.Registry, name string) *dto.Metric {
	t.Helper()
	m := metric(t, reg, name)
	if m == nil {
		t.Fatalf("no metric %s", name)
	}
	return m
}

func metric(t *testing.T, reg *prometheus.Registry, name string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0]
		}
	}
	return nil
}

func TestRedeliveryAndMispartitionedRecord(t *testing.T) {
	f := newFixture(t)
	const group = "joiner-dup"
	f.send(contract.TypePlatformRecord, "platform", t0, record("s", "running"), -1)
	f.send(contract.TypeProviderObservation, "scanner", t0.Add(time.Second), observation("s", "stopped"), -1)
	// Redeliver the same observation (same producer and seq).
	f.seq["scanner"]--
	f.send(contract.TypeProviderObservation, "scanner", t0.Add(time.Second), observation("s", "stopped"), -1)
	// A record lives on its partition; a disagreeing observation of the
	// same identity is written to a partition its key does not hash to.
	// Only if it is joined with its record does it raise stale state.
	f.send(contract.TypePlatformRecord, "platform", t0, record("x", "running"), -1)
	key := []byte(contract.IdentityKey(contract.ProviderAppRuntime, "x"))
	right := contract.Partition(key, 4)
	wrong := (right + 1) % 4
	f.send(contract.TypeProviderObservation, "rogue", t0.Add(2*time.Second), observation("x", "stopped"), wrong)

	reroute, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer reroute.Close()
	ctx := context.Background()
	opts := f.options(group)
	opts.Reroute = reroute
	j, err := New(ctx, opts, sink.NewClickHouse(f.ch))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- j.Run(rctx) }()
	f.caughtUp(group)
	want := []string{
		"stale_lifecycle_state:app_runtime/s open 0",
		"stale_lifecycle_state:app_runtime/x open 0",
	}
	// The rerouted copy is read on the right partition in a later round.
	testenv.CheckFor(t, 30*time.Second, func() error {
		if got := f.findings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			return fmt.Errorf("findings %v, want %v (a redelivery must not count as a confirmation; a mis-partitioned record must join its record)", got, want)
		}
		return nil
	})
	f.caughtUp(group)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := counterValue(j.m.duplicates); got != 1 {
		t.Fatalf("duplicates = %v, want 1", got)
	}
	if got := counterValue(j.m.mispartitioned.WithLabelValues(f.names.Observations)); got != 1 {
		t.Fatalf("mispartitioned = %v, want 1", got)
	}

	// The copy sits on the right partition, saying where it came from.
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		f.names.Observations: {right: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var from string
	testenv.CheckFor(t, 30*time.Second, func() error {
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		defer pcancel()
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == HeaderReroutedFrom {
					from = string(h.Value)
				}
			}
		})
		if from == "" {
			return fmt.Errorf("no rerouted copy on %s/%d", f.names.Observations, right)
		}
		return nil
	})
	if !strings.HasPrefix(from, fmt.Sprintf("%s/%d/", f.names.Observations, wrong)) {
		t.Fatalf("rerouted_from = %q, want %s/%d/<offset>", from, f.names.Observations, wrong)
	}
}

func TestInvalidRecordIsQuarantined(t *testing.T) {
	f := newFixture(t)
	const group = "joiner-quarantine"
	// A Kafka-native producer that skipped the gateway writes a record the
	// validator rejects (a float where money must be a decimal string).
	bad := []byte(`{"event_id":"b1","event_type":"provider.observation","schema_version":1,"producer":"rogue","seq":1,` +
		`"occurred_at":"2026-11-21T10:00:00Z","environment":"local_parity","payload":{"provider":"maas","provider_id":"n1",` +
		`"resource_family":"gpuaas_allocation","observed_state":"running","usage":12.5}}`)
	if err := f.cl.ProduceSync(context.Background(), &kgo.Record{Topic: f.names.Observations, Key: []byte("maas/n1"), Value: bad}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	q := f.quarantiner()
	ctx, cancel := context.WithCancel(context.Background())
	opts := f.options(group)
	opts.Quarantine = q
	j, err := New(ctx, opts, sink.NewClickHouse(f.ch))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	f.caughtUp(group)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	got := f.quarantined(1)
	if headers := headersOf(got[0]); headers[contract.HeaderReason] != string(contract.ReasonWrongType) || headers[contract.HeaderActorID] != "SYSTEM::joiner" || string(got[0].Key) != "maas/n1" {
		t.Fatalf("quarantine record key %q headers %v", got[0].Key, headers)
	}
	if v := counterValue(j.m.invalid.WithLabelValues(string(contract.ReasonWrongType))); v != 1 {
		t.Fatalf("invalid counter %v, want 1", v)
	}
}

// restartable returns the options of a joiner whose runs share one
// checkpoint store, written every millisecond, and quarantine to the
// fixture's topic; reg receives a run's metrics.
func (f *fixture) restartable() func(reg prometheus.Registerer) func(*Options) {
	q, store := f.quarantiner(), f.checkpoints()
	return func(reg prometheus.Registerer) func(*Options) {
		return func(o *Options) {
			checkpointing(store, time.Millisecond, reg)(o)
			o.Quarantine = q
		}
	}
}

// quarantiner returns a quarantine writer to the fixture's quarantine
// topic, as the joiner's main makes it.
func (f *fixture) quarantiner() *ingest.Quarantiner {
	f.t.Helper()
	q, err := ingest.NewQuarantiner(f.cl, ingest.QuarantinerOptions{ActorID: "SYSTEM::joiner", Topic: f.names.Quarantine})
	if err != nil {
		f.t.Fatal(err)
	}
	return q
}

// quarantined reads the quarantine topic until it holds n records, and
// returns them.
func (f *fixture) quarantined(n int) []*kgo.Record {
	f.t.Helper()
	cl := testenv.KafkaClient(f.t, f.brokers, kgo.ConsumeTopics(f.names.Quarantine), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n && ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, n-len(got))
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	if len(got) != n {
		f.t.Fatalf("quarantine holds %d records, want %d", len(got), n)
	}
	return got
}

func headersOf(r *kgo.Record) map[string]string {
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	return headers
}

// TestLateEventIsQuarantinedAndCounted: an event older than the
// partition's dedupe horizon is not applied, and neither vanishes: it is
// quarantined with its reason and counted for its producer, in the
// partition's state, so a restart (from a checkpoint or a replay) neither
// counts it again nor quarantines it twice.
func TestLateEventIsQuarantinedAndCounted(t *testing.T) {
	f := newFixture(t)
	const group = "joiner-late"
	restartable := f.restartable()
	with := func(reg prometheus.Registerer) func(*Options) {
		return func(o *Options) {
			restartable(reg)(o)
			o.Dedupe = dedupe.Options{Horizon: 10 * time.Minute, Bucket: time.Minute}
		}
	}
	f.send(contract.TypeProviderObservation, "scanner", t0.Add(time.Hour), observation("a", "running"), -1)
	f.send(contract.TypeProviderObservation, "laggard", t0, observation("a", "stopped"), -1)
	stop := f.start(group, with(prometheus.NewRegistry()))
	f.caughtUp(group)
	stop()

	got := f.quarantined(1)
	if h := headersOf(got[0]); h[contract.HeaderReason] != string(contract.ReasonLate) || string(got[0].Key) != "app_runtime/a" {
		t.Fatalf("quarantine record key %q headers %v", got[0].Key, h)
	}
	rd := reader.New(f.ch, reader.Options{})
	want := func() {
		t.Helper()
		rows, err := rd.ProducerRejections(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Consumer != group || rows[0].Producer != "laggard" ||
			rows[0].Reason != string(contract.ReasonLate) || rows[0].Events != 1 {
			t.Fatalf("producer rejections %+v, want laggard late_event 1 of %s", rows, group)
		}
	}
	want()

	// Restored from its checkpoint, the joiner keeps the count; a new late
	// event of the same producer adds one.
	f.send(contract.TypeProviderObservation, "laggard", t0.Add(time.Minute), observation("a", "stopped"), -1)
	stop = f.start(group, with(prometheus.NewRegistry()))
	f.caughtUp(group)
	stop()
	f.quarantined(2)
	rows, err := rd.ProducerRejections(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Events != 2 {
		t.Fatalf("after a restart and one more late event: %+v, want laggard at 2", rows)
	}
}

// TestIdlePartitionFollows: a partition that receives nothing still sees
// its staleness deadline pass once the joiner's other partitions move on,
// through a watermark marker in its own log, and a replay of the topics
// yields the same finding.
func TestIdlePartitionFollows(t *testing.T) {
	f := newFixture(t)
	// Two identities on different partitions.
	quiet, busy := "", ""
	for i := 0; quiet == "" || busy == ""; i++ {
		id := fmt.Sprint("app-", i)
		switch p := contract.Partition([]byte("app_runtime/"+id), 4); {
		case p == 0 && quiet == "":
			quiet = id
		case p == 1 && busy == "":
			busy = id
		}
	}
	f.send(contract.TypePlatformRecord, "platform", t0, record(quiet, "running"), -1)
	f.send(contract.TypePlatformRecord, "platform", t0, record(busy, "running"), -1)
	f.send(contract.TypeProviderObservation, "scanner", t0.Add(time.Second), observation(quiet, "running"), -1)
	for m := range 30 { // only the busy identity is observed for 30 minutes
		f.send(contract.TypeProviderObservation, "scanner", t0.Add(time.Duration(m)*time.Minute), observation(busy, "running"), -1)
	}
	idle := func(o *Options) { o.IdleAfter = 300 * time.Millisecond }
	stop := f.start("joiner-idle", idle)
	want := []string{"missing_provider_resource:app_runtime/" + quiet + " open 0"}
	testenv.CheckFor(t, 30*time.Second, func() error {
		if got := f.findings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			return fmt.Errorf("findings %v", got)
		}
		return nil
	})
	stop()
	if err := f.ch.Exec(context.Background(), "TRUNCATE TABLE drift_evidence"); err != nil {
		t.Fatal(err)
	}
	stop = f.start("joiner-idle-replay", func(o *Options) { o.IdleAfter = -1 })
	f.caughtUp("joiner-idle-replay")
	stop()
	f.wantFindings(want)
}

// TestConflictingRedeliveryIsQuarantined: a Kafka-native producer that
// reuses a seq, with other content under the same event_id or under a new
// one, has both repeats quarantined as conflicting_duplicate, counted for
// it and never applied; a byte-for-byte redelivery and one re-serialised
// in another key order are skipped as duplicates. Restored from its
// checkpoint, the joiner still knows the first event's digest.
func TestConflictingRedeliveryIsQuarantined(t *testing.T) {
	f := newFixture(t)
	const group = "joiner-conflict"
	with := f.restartable()
	reg := prometheus.NewRegistry()
	produce := func(rs ...*kgo.Record) {
		t.Helper()
		for _, r := range rs {
			if err := f.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.send(contract.TypePlatformRecord, "platform", t0, record("s", "running"), -1)
	f.send(contract.TypeProviderObservation, "scanner", t0.Add(time.Second), observation("s", "running"), -1)
	seq := f.seq["scanner"]
	event := func(id, state string) *kgo.Record {
		r := streamtest.Event(t, f.names, contract.TypeProviderObservation, "scanner", seq, t0.Add(time.Second), observation("s", state))
		r.Value = bytes.Replace(r.Value, []byte(`"event_id":"scanner-`), []byte(`"event_id":"`+id+`-`), 1)
		return r
	}
	first := event("scanner", "running")
	// The same event re-serialised: another key order and spaces.
	var doc map[string]any
	if err := json.Unmarshal(first.Value, &doc); err != nil {
		t.Fatal(err)
	}
	reordered, err := json.MarshalIndent(doc, "", "  ") // encoding/json sorts the keys
	if err != nil {
		t.Fatal(err)
	}
	produce(first, &kgo.Record{Topic: first.Topic, Key: first.Key, Value: reordered},
		event("scanner", "stopped"), // the same event_id, other content
		event("other", "deleted"))   // a new event_id under the seq, other content
	stop := f.start(group, with(reg))
	f.caughtUp(group)
	stop()

	// Neither conflict was applied: the record and its first observation
	// agree, so there is no finding.
	f.wantFindings(nil)
	if d, c := mustCounter(t, reg, "driftline_joiner_duplicates_total"), mustCounter(t, reg, "driftline_joiner_conflicting_duplicates_total"); d != 2 || c != 2 {
		t.Fatalf("duplicates %v, conflicts %v; want 2 and 2", d, c)
	}
	check := func(n int) {
		t.Helper()
		for i, r := range f.quarantined(n) {
			var q contract.Quarantined
			if err := json.Unmarshal(r.Value, &q); err != nil {
				t.Fatal(err)
			}
			if q.Reason != contract.ReasonConflictingDuplicate || q.Field != "seq" || !strings.Contains(q.Detail, "content digest") {
				t.Fatalf("quarantine record %d: %+v", i, q)
			}
		}
		rows, err := reader.New(f.ch, reader.Options{}).ProducerRejections(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Consumer != group || rows[0].Producer != "scanner" ||
			rows[0].Reason != string(contract.ReasonConflictingDuplicate) || rows[0].Events != uint64(n) {
			t.Fatalf("producer rejections %+v, want scanner conflicting_duplicate %d of %s", rows, n, group)
		}
	}
	check(2)

	// Restored from its checkpoint: a redelivery is still a duplicate and
	// a third content under the seq still a conflict, counted once more.
	produce(first, event("third", "released"))
	stop = f.start(group, with(prometheus.NewRegistry()))
	f.caughtUp(group)
	stop()
	f.wantFindings(nil)
	check(3)
}
