package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// TestClockSkewIsNotApplied: a usage event stamped 2099 by a producer
// whose broker timestamps are those of 2026 is quarantined as clock_skew,
// counted for its producer, and moves no event time: the rated line of
// the usage before it is not overdue for its ledger entry.
func TestClockSkewIsNotApplied(t *testing.T) {
	f := newFixture(t)
	sendLogged := func(typ, producer string, at, ts time.Time, payload any) {
		t.Helper()
		f.seq[producer]++
		rec := streamtest.Event(t, f.names, typ, producer, f.seq[producer], at, payload)
		rec.Timestamp = ts
		if err := f.cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	u := usage("u1", "m-1", "gpu_hour")
	u.WindowStart, u.WindowEnd = t0.Add(-time.Minute), t0
	sendLogged(contract.TypeUsageRecorded, "gpu-meter", t0, t0.Add(time.Second), u)
	r := rated("u1", "m-1", "4.90")
	r.RatedAt = t0.Add(time.Second)
	sendLogged(contract.TypeBillingRated, "rater", t0.Add(time.Second), t0.Add(2*time.Second), r)
	future := usage("u2", "m-1", "gpu_hour")
	at := time.Date(2099, 6, 1, 0, 0, 0, 0, time.UTC)
	future.WindowStart, future.WindowEnd = at.Add(-time.Minute), at
	// On u1's metering key, so on its partition; applied, it would be
	// duplicate_usage as well.
	sendLogged(contract.TypeUsageRecorded, "broken-meter", at, t0.Add(3*time.Second), future)

	q, err := ingest.NewQuarantiner(f.cl, ingest.QuarantinerOptions{ActorID: "SYSTEM::billing", Topic: f.names.Quarantine})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	const group = "billing-skew"
	stop := f.start(group, func(o *Options) { o.Quarantine, o.Registerer = q, reg })
	rd := reader.New(f.ch, reader.Options{})
	testenv.CheckFor(t, 30*time.Second, func() error {
		rows, err := rd.ProducerRejections(context.Background())
		if err != nil {
			return err
		}
		if len(rows) != 1 || rows[0].Consumer != group || rows[0].Producer != "broken-meter" || rows[0].Reason != string(contract.ReasonClockSkew) || rows[0].Events != 1 {
			return fmt.Errorf("producer rejections %+v, want broken-meter clock_skew 1", rows)
		}
		return nil
	})
	stop()
	if got, err := f.rows(); err != nil || len(got) != 0 {
		t.Fatalf("billing_mismatch rows %v (%v), want none: event time did not pass the ledger grace", got, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumeTopics(f.names.Quarantine), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs := cl.PollRecords(ctx, 10)
	var reasons []string
	fs.EachRecord(func(r *kgo.Record) {
		for _, h := range r.Headers {
			if h.Key == contract.HeaderReason {
				reasons = append(reasons, string(h.Value))
			}
		}
	})
	if len(reasons) != 1 || reasons[0] != string(contract.ReasonClockSkew) {
		t.Fatalf("quarantine reasons %v, want one clock_skew", reasons)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "driftline_billing_watermark_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if w := m.GetGauge().GetValue(); w > float64(t0.Add(3*time.Second).Unix()) {
				t.Fatalf("watermark %v past the log's clock", time.Unix(int64(w), 0).UTC())
			}
		}
	}
}
