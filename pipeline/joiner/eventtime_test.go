package joiner

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// sendLogged produces one event of producer that occurred at at, with the
// broker timestamp ts (CreateTime, as a producer whose clock reads ts
// writes it), to the partition its key hashes to.
func (f *fixture) sendLogged(typ, producer string, at, ts time.Time, payload any) {
	f.t.Helper()
	f.seq[producer]++
	r := streamtest.Event(f.t, f.names, typ, producer, f.seq[producer], at, payload)
	r.Timestamp = ts
	if err := f.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// idsOn returns n app_runtime provider ids whose identity keys hash to
// partition p of 4.
func idsOn(p int32, prefix string, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprint(prefix, i)
		if contract.Partition([]byte(contract.ProviderAppRuntime+"/"+id), 4) == p {
			ids = append(ids, id)
		}
	}
	return ids
}

// producerRejections returns the producer_rejections rows as
// "producer reason events", for group.
func (f *fixture) producerRejections(group string) []string {
	f.t.Helper()
	rows, err := reader.New(f.ch, reader.Options{}).ProducerRejections(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if r.Consumer == group {
			out = append(out, fmt.Sprintf("%s %s %d", r.Producer, r.Reason, r.Events))
		}
	}
	sort.Strings(out)
	return out
}

// TestSkewedProducerCannotMoveEventTime: on one partition whose log runs
// in step with its events (broker timestamps a second after occurred_at),
// a producer with a broken clock writes an event 73 years ahead, one 4
// minutes ahead (within the allowed skew) and one 3 days behind. The first
// is quarantined as clock_skew, the last as late_event, both counted for
// the producer; the second is applied but moves event time no further
// than its broker timestamp. The other producers' findings are exactly
// those of a log without the skewed producer: no identity goes missing
// early. Replayed without the bounds, the same log gives other findings,
// so the test sees what the bounds change.
func TestSkewedProducerCannotMoveEventTime(t *testing.T) {
	f := newFixture(t)
	ids := idsOn(2, "skew-", 5)
	a, b, s1, s2, s3 := ids[0], ids[1], ids[2], ids[3], ids[4]
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	ts := func(d time.Duration) time.Time { return base.Add(d + time.Second) }

	f.sendLogged(contract.TypePlatformRecord, "platform", at(0), ts(0), record(a, "running"))
	f.sendLogged(contract.TypePlatformRecord, "platform", at(0), ts(0), record(b, "running"))
	f.sendLogged(contract.TypeProviderObservation, "scanner", at(time.Minute), ts(time.Minute), observation(a, "running"))
	f.sendLogged(contract.TypeProviderObservation, "scanner", at(time.Minute), ts(time.Minute), observation(b, "running"))
	// The broken clock: far ahead, slightly ahead (within the skew), and
	// behind by more than the dedupe horizon.
	f.sendLogged(contract.TypeProviderObservation, "broken", time.Date(2099, 6, 1, 0, 0, 0, 0, time.UTC), ts(2*time.Minute), observation(s1, "running"))
	f.sendLogged(contract.TypeProviderObservation, "broken", at(13*time.Minute), ts(9*time.Minute), observation(s2, "running"))
	f.sendLogged(contract.TypeProviderObservation, "scanner", at(9*time.Minute), ts(9*time.Minute), observation(a, "running"))
	f.sendLogged(contract.TypeProviderObservation, "broken", at(-72*time.Hour), ts(10*time.Minute), observation(s3, "running"))
	// b is observed before its staleness deadline (1m + 10m) passes in the
	// other producers' time.
	f.sendLogged(contract.TypeProviderObservation, "scanner", at(10*time.Minute+30*time.Second), ts(10*time.Minute+30*time.Second), observation(b, "running"))

	q := f.quarantiner()
	reg := prometheus.NewRegistry()
	const group = "joiner-skew"
	stop := f.start(group, func(o *Options) { o.Quarantine, o.Registerer = q, reg })
	f.caughtUp(group)
	stop()

	// Nothing of a or b: neither went unobserved for the staleness window
	// in the log's time, and s2's orphan grace has not passed.
	f.wantFindings(nil)
	reasons := map[string]string{}
	for _, r := range f.quarantined(2) {
		reasons[string(r.Key)] = headersOf(r)[contract.HeaderReason]
	}
	if want := map[string]string{contract.ProviderAppRuntime + "/" + s1: string(contract.ReasonClockSkew), contract.ProviderAppRuntime + "/" + s3: string(contract.ReasonLate)}; fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("quarantined %v, want %v", reasons, want)
	}
	if got, want := f.producerRejections(group), []string{"broken clock_skew 1", "broken late_event 1"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("producer rejections %v, want %v", got, want)
	}
	// Event time follows the log: the newest event time applied is 10m30s
	// (b's last observation), not s2's 13m.
	if got, want := gauge(t, reg, "driftline_joiner_watermark_seconds"), float64(at(10*time.Minute).Unix()); got != want {
		t.Fatalf("watermark %v, want %v (10m30s less the allowed lateness)", time.Unix(int64(got), 0).UTC(), time.Unix(int64(want), 0).UTC())
	}
	if n := counter(t, reg, "driftline_joiner_clock_skew_events_total"); n != 1 {
		t.Fatalf("clock skew counter %v, want 1", n)
	}

	// The same log applied as before the bounds: the far-future event
	// moves event time to 2099, every deadline passes.
	if err := f.ch.Exec(context.Background(), "TRUNCATE TABLE drift_evidence"); err != nil {
		t.Fatal(err)
	}
	stop = f.start("joiner-skew-unbounded", func(o *Options) { o.unbounded = true })
	f.caughtUp("joiner-skew-unbounded")
	stop()
	if got := f.findings(); len(got) == 0 {
		t.Fatal("without the bounds the skewed producer changes nothing: the test does not exercise them")
	}
}

// TestIgnoreCheckpointsBefore is the way back from a state checkpointed
// while a skewed producer had moved it years ahead (as before the bounds):
// restored from its checkpoint, the joiner drops every real event as
// late; restored with IgnoreCheckpointsBefore, it rebuilds the partitions
// from their streams under the bounds, quarantines the far-future event,
// and applies what comes next. Its own checkpoints are then used again.
func TestIgnoreCheckpointsBefore(t *testing.T) {
	f := newFixture(t)
	const group = "joiner-poisoned"
	with := f.restartable()
	ids := idsOn(1, "poison-", 3)
	a, c, s := ids[0], ids[1], ids[2]
	base := time.Now().Add(-time.Hour).Truncate(time.Second)

	// A state poisoned by an event in 2099, checkpointed.
	f.send(contract.TypePlatformRecord, "platform", base, record(a, "running"), -1)
	f.send(contract.TypeProviderObservation, "scanner", base.Add(time.Minute), observation(a, "running"), -1)
	f.send(contract.TypeProviderObservation, "broken", time.Date(2099, 6, 1, 0, 0, 0, 0, time.UTC), observation(s, "running"), -1)
	stop := f.start(group, with(prometheus.NewRegistry()), func(o *Options) { o.unbounded = true })
	f.caughtUp(group)
	stop()

	// Restored from the poisoned checkpoint, a real observation is late.
	f.send(contract.TypeProviderObservation, "scanner", base.Add(2*time.Minute), observation(a, "running"), -1)
	stop = f.start(group, with(prometheus.NewRegistry()))
	f.caughtUp(group)
	stop()
	if got := f.producerRejections(group); strings.Join(got, ",") != "scanner late_event 1" {
		t.Fatalf("producer rejections %v, want the scanner's observation late", got)
	}

	// Rebuilt from the streams: the 2099 event is quarantined, event time
	// is the log's again, and a new identity's drift is found.
	reg := prometheus.NewRegistry()
	cutoff := time.Now()
	stop = f.start(group, with(reg), func(o *Options) { o.IgnoreCheckpointsBefore = cutoff })
	f.caughtUp(group)
	if n := counter(t, reg, "driftline_joiner_restore_checkpoints_total"); n != 0 {
		t.Fatalf("%v partitions restored from a checkpoint written before the cutoff", n)
	}
	f.send(contract.TypePlatformRecord, "platform", base.Add(3*time.Minute), record(c, "running"), -1)
	f.send(contract.TypeProviderObservation, "scanner", base.Add(3*time.Minute), observation(c, "stopped"), -1)
	f.caughtUp(group)
	stop()
	// The gauge is set when a partition applies live records (a restore's
	// replay sets none), so it is read after the new identity's.
	if w := gauge(t, reg, "driftline_joiner_watermark_seconds"); w > float64(time.Now().Unix()) {
		t.Fatalf("watermark %v still in the future after the rebuild", time.Unix(int64(w), 0).UTC())
	}
	got := f.findings()
	if want := "stale_lifecycle_state:app_runtime/" + c + " open 0"; !slices.Contains(got, want) {
		t.Fatalf("findings %v: the rebuilt joiner did not apply %s's observation", got, c)
	}
	// The rebuilt state counts the 2099 event and applied the scanner's
	// observation; the late count the poisoned state wrote stays in the
	// table (rows are per producer and reason, and the rebuilt state has
	// none for the scanner to write over it).
	if got := f.producerRejections(group); strings.Join(got, ",") != "broken clock_skew 1,scanner late_event 1" {
		t.Fatalf("producer rejections %v after the rebuild", got)
	}

	// The checkpoints the rebuilt joiner wrote are used again.
	reg = prometheus.NewRegistry()
	stop = f.start(group, with(reg), func(o *Options) { o.IgnoreCheckpointsBefore = cutoff })
	f.caughtUp(group)
	stop()
	if n := counter(t, reg, "driftline_joiner_restore_checkpoints_total"); n == 0 {
		t.Fatal("no partition restored from the checkpoints written after the cutoff")
	}
}

// TestIdleMarkersDoNotSpreadTheFuture: one partition's watermark is in
// 2099 (applied as before the bounds); an idle partition of the same
// joiner follows the others through a watermark marker, but only as far
// as the joiner's clock, never into the future.
func TestIdleMarkersDoNotSpreadTheFuture(t *testing.T) {
	f := newFixture(t)
	poisoned, idle := idsOn(1, "spread-", 1)[0], idsOn(0, "spread-", 1)[0]
	f.send(contract.TypePlatformRecord, "platform", t0, record(idle, "running"), -1)
	f.send(contract.TypeProviderObservation, "broken", time.Date(2099, 6, 1, 0, 0, 0, 0, time.UTC), observation(poisoned, "running"), -1)
	reg := prometheus.NewRegistry()
	stop := f.start("joiner-spread", func(o *Options) { o.unbounded, o.IdleAfter, o.Registerer = true, 300*time.Millisecond, reg })
	defer stop()
	watermarks := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == "driftline_joiner_watermark_seconds" {
				for _, m := range mf.GetMetric() {
					out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	// Every other partition follows through a marker: partition 0 from
	// t0, partitions 2 and 3 from nothing.
	var w map[string]float64
	testenv.CheckFor(t, 30*time.Second, func() error {
		w = watermarks()
		for _, p := range []string{"0", "2", "3"} {
			if w[p] <= float64(t0.Unix()) {
				return fmt.Errorf("watermarks %v: partition %s has not followed yet", w, p)
			}
		}
		return nil
	})
	if w["1"] < float64(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) {
		t.Fatalf("watermarks %v: partition 1 not poisoned, the test shows nothing", w)
	}
	for _, p := range []string{"0", "2", "3"} {
		if w[p] > float64(time.Now().Unix()) {
			t.Fatalf("watermarks %v: partition %s followed partition 1 into the future; idle partitions follow up to the joiner's clock", w, p)
		}
	}
}
