// Package billing_test measures the billing reconciler's tracker: time per
// reconciled usage (usage, rated line, posting) and the memory it holds per
// tracked usage_id, before and after the horizon drops settled usage. See
// README.md for the command and the figures measured.
package billing_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/billing/reconcile"
	"github.com/driftline/driftline/pipeline/contract"
)

const book = `{"units":[
 {"unit_id":"gpu_hour","version":1,"precision":2,"unit_price":"2.450000","currency":"USD","rating_category":"compute","lifecycle":"active"}]}`

var t0 = time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)

type input struct {
	u  contract.Usage
	r  contract.Rated
	l  contract.LedgerEntry
	at time.Time
}

// inputs returns n usages spread over hours of event time (perHour each),
// 300 tenants, every one rated and posted.
func inputs(n, perHour int) []input {
	out := make([]input, n)
	for i := range out {
		out[i] = gen(i, perHour)
	}
	return out
}

// gen returns usage i with strings of its own, as decoding gives them.
func gen(i, perHour int) input {
	{
		// As in the generated fleet, the usage_id embeds its metering_id.
		meter := fmt.Sprintf("vm-%07d:r1:%d", i/4, i%4)
		id := fmt.Sprintf("usg-run1-vm-%07d:r1:%d", i/4, i%4)
		tenant := fmt.Sprintf("tenant-%03d", i%300)
		at := t0.Add(time.Duration(i/perHour)*time.Hour + time.Duration(i%perHour)*time.Hour/time.Duration(perHour))
		return input{
			u: contract.Usage{UsageID: id, MeteringSource: "gpu-meter-eu1", MeteringID: meter, UnitID: "gpu_hour",
				Quantity: "2.500000", ProductID: "gpuaas", TenantID: tenant, ProjectID: "p-1"},
			r: contract.Rated{UsageID: id, MeteringSource: "gpu-meter-eu1", MeteringID: meter, UnitID: "gpu_hour", UnitVersion: 1,
				Quantity: "2.500000", UnitPrice: "2.450000", Amount: "6.13", Currency: "USD", TenantID: tenant, ProductID: "gpuaas"},
			l:  contract.LedgerEntry{LedgerEntryID: "le-" + id, UsageID: id, MeteringSource: "gpu-meter-eu1", MeteringID: meter, Amount: "6.13", Currency: "USD"},
			at: at,
		}
	}
}

func newTracker(b *testing.B, horizon time.Duration) *reconcile.Tracker {
	bk, err := pricebook.Parse([]byte(book))
	if err != nil {
		b.Fatal(err)
	}
	prices := pricebook.NewStatic(bk)
	rules := reconcile.DefaultRules()
	rules.Horizon = horizon
	return reconcile.NewTracker(rules, prices.Book, func(*reconcile.Mismatch) {})
}

func apply(tr *reconcile.Tracker, in []input) {
	for i := range in {
		applyOne(tr, &in[i], i)
	}
	tr.TakeWindows(nil)
}

func applyOne(tr *reconcile.Tracker, x *input, i int) {
	tr.ApplyUsage(&x.u, x.at)
	tr.ApplyRated(&x.r, x.at)
	tr.ApplyLedger(&x.l, x.at.Add(5*time.Minute))
	if i%1000 == 999 {
		tr.TakeWindows(nil)
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkTrackerReconcile applies one usage, its rated line and its
// posting per op (10,000 usages an hour), horizon 48h: the steady state.
func BenchmarkTrackerReconcile(b *testing.B) {
	in := inputs(b.N, 10000)
	tr := newTracker(b, 48*time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	apply(tr, in)
	b.StopTimer()
	b.ReportMetric(float64(b.N)*3/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkTrackerMemory holds N settled usages in memory (horizon longer
// than the run), then moves event time past the horizon so that they are
// dropped, and reports the heap held per usage_id in both states.
func BenchmarkTrackerMemory(b *testing.B) {
	const n = 200000
	for range b.N {
		tr := newTracker(b, 24*time.Hour)
		base := heap()
		var last time.Time
		for i := range n { // 20 hours of event time
			x := gen(i, 10000)
			applyOne(tr, &x, i)
			last = x.at
		}
		tr.TakeWindows(nil)
		tracked := heap()
		if u, _ := tr.Tracked(); u != n {
			b.Fatalf("tracked %d, want %d", u, n)
		}
		tr.Advance(last.Add(48 * time.Hour))
		tr.TakeWindows(nil)
		dropped := heap()
		if u, w := tr.Tracked(); u != 0 || w != 0 {
			b.Fatalf("after the horizon: %d usage, %d windows", u, w)
		}
		b.ReportMetric(float64(tracked-base)/n, "B/tracked-usage")
		b.ReportMetric(float64(dropped-base)/n, "B/dropped-usage")
		runtime.KeepAlive(tr)
	}
}
