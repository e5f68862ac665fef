package reconcile

import (
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

const testBook = `{"units":[
 {"unit_id":"gpu_hour","version":1,"precision":2,"unit_price":"2.450000","currency":"USD","rating_category":"compute","lifecycle":"active"},
 {"unit_id":"gpu_hour_legacy","version":1,"precision":2,"unit_price":"2.100000","currency":"USD","rating_category":"compute","lifecycle":"retired"}]}`

func testPrices(t testing.TB) *pricebook.Store {
	t.Helper()
	b, err := pricebook.Parse([]byte(testBook))
	if err != nil {
		t.Fatal(err)
	}
	return pricebook.NewStatic(b)
}

type recorder struct {
	rows map[string]Mismatch
	n    int
}

func newTestTracker(t *testing.T) (*Tracker, *recorder) {
	rec := &recorder{rows: map[string]Mismatch{}}
	prices := testPrices(t)
	tr := NewTracker(DefaultRules(), prices.Book, func(m *Mismatch) {
		if prev, ok := rec.rows[m.MismatchID]; ok && m.Version <= prev.Version {
			t.Fatalf("%s: version %d after %d", m.MismatchID, m.Version, prev.Version)
		}
		rec.rows[m.MismatchID] = *m
		rec.n++
	})
	return tr, rec
}

func usage(id, key, unit string) *contract.Usage {
	return &contract.Usage{UsageID: id, MeteringSource: "gpu-meter", MeteringID: key, UnitID: unit, Quantity: "2.000000",
		ProductID: "gpuaas", TenantID: "t-1", ProjectID: "p"}
}

func rated(id, key, amount string) *contract.Rated {
	return &contract.Rated{UsageID: id, MeteringSource: "gpu-meter", MeteringID: key, UnitID: "gpu_hour", UnitVersion: 1,
		Quantity: "2.000000", UnitPrice: "2.450000", Amount: amount, Currency: "USD", TenantID: "t-1", ProductID: "gpuaas"}
}

func ledger(id, amount, currency string) *contract.LedgerEntry {
	return &contract.LedgerEntry{LedgerEntryID: "le-" + id, UsageID: id, MeteringSource: "gpu-meter", MeteringID: "m-" + id,
		Amount: amount, Currency: currency}
}

func (r *recorder) want(t *testing.T, id string, status contract.FindingStatus) Mismatch {
	t.Helper()
	m, ok := r.rows[id]
	if !ok {
		t.Fatalf("no row for %s; rows %v", id, r.rows)
	}
	if m.Status != status {
		t.Fatalf("%s: status %s, want %s", id, m.Status, status)
	}
	return m
}

func (r *recorder) none(t *testing.T, id string) {
	t.Helper()
	if m, ok := r.rows[id]; ok {
		t.Fatalf("unexpected row %+v", m)
	}
}

func TestUsageNotRatedInEventTime(t *testing.T) {
	tr, rec := newTestTracker(t)
	tr.ApplyUsage(usage("u1", "m-u1", "gpu_hour"), t0)
	// The watermark (newest - 30s) must reach t0+5m: an event at t0+5m29s
	// is not enough, one at t0+5m30s is.
	tr.Advance(t0.Add(5*time.Minute + 29*time.Second))
	rec.none(t, "usage_not_rated:u1")
	tr.Advance(t0.Add(5*time.Minute + 30*time.Second))
	m := rec.want(t, "usage_not_rated:u1", contract.StatusOpen)
	if !m.FirstSeenAt.Equal(t0.Add(5*time.Minute)) || m.Quantity != "2.000000" || m.TenantID != "t-1" || m.UnitID != "gpu_hour" || m.Currency != "USD" {
		t.Fatalf("row %+v", m)
	}
	// A late rated line resolves it and is still waiting for its ledger.
	if !tr.ApplyRated(rated("u1", "m-u1", "4.90"), t0) {
		t.Fatal("rated line not new")
	}
	m = rec.want(t, "usage_not_rated:u1", contract.StatusResolved)
	if m.RatedAmount != "4.90" {
		t.Fatalf("row %+v", m)
	}
	if tr.ApplyRated(rated("u1", "m-u1", "4.90"), t0) {
		t.Fatal("a repeated rated line is new")
	}
	if tr.Open() != 0 {
		t.Fatalf("open %d", tr.Open())
	}
}

func TestRatedInTimeRaisesNothing(t *testing.T) {
	tr, rec := newTestTracker(t)
	tr.ApplyUsage(usage("u1", "m-u1", "gpu_hour"), t0)
	tr.ApplyRated(rated("u1", "m-u1", "4.90"), t0)
	tr.ApplyLedger(ledger("u1", "4.9", "USD"), t0.Add(2*time.Minute)) // 4.9 == 4.90 exactly
	tr.Advance(t0.Add(time.Hour))
	if len(rec.rows) != 0 {
		t.Fatalf("rows %v", rec.rows)
	}
}

func TestRatedNotLedgered(t *testing.T) {
	tr, rec := newTestTracker(t)
	tr.ApplyUsage(usage("u1", "m-u1", "gpu_hour"), t0)
	tr.ApplyRated(rated("u1", "m-u1", "4.90"), t0)
	tr.Advance(t0.Add(15*time.Minute + 29*time.Second))
	rec.none(t, "rated_not_ledgered:u1")
	tr.Advance(t0.Add(15*time.Minute + 30*time.Second))
	m := rec.want(t, "rated_not_ledgered:u1", contract.StatusOpen)
	if m.RatedAmount != "4.90" || m.LedgerAmount != "" || !m.FirstSeenAt.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("row %+v", m)
	}
	tr.ApplyLedger(ledger("u1", "4.90", "USD"), t0.Add(16*time.Minute))
	m = rec.want(t, "rated_not_ledgered:u1", contract.StatusResolved)
	if m.LedgerAmount != "4.90" || !m.LastSeenAt.Equal(t0.Add(16*time.Minute)) {
		t.Fatalf("row %+v", m)
	}
	rec.none(t, "amount_mismatch:u1")
}

func TestRatedAfterLedgerGraceOpensAtOnce(t *testing.T) {
	tr, rec := newTestTracker(t)
	tr.ApplyUsage(usage("u1", "m-u1", "gpu_hour"), t0)
	tr.Advance(t0.Add(20 * time.Minute))
	rec.want(t, "usage_not_rated:u1", contract.StatusOpen)
	tr.ApplyRated(rated("u1", "m-u1", "4.90"), t0)
	rec.want(t, "usage_not_rated:u1", contract.StatusResolved)
	m := rec.want(t, "rated_not_ledgered:u1", contract.StatusOpen)
	if !m.FirstSeenAt.Equal(t0.Add(15 * time.Minute)) {
		t.Fatalf("row %+v", m)
	}
}

func TestAmountMismatch(t *testing.T) {
	f := func(name, amount, currency string, mismatch bool) {
		t.Run(name, func(t *testing.T) {
			for _, ledgerFirst := range []bool{false, true} {
				tr, rec := newTestTracker(t)
				tr.ApplyUsage(usage("u1", "m-u1", "gpu_hour"), t0)
				if ledgerFirst {
					tr.ApplyLedger(ledger("u1", amount, currency), t0.Add(2*time.Minute))
					tr.ApplyRated(rated("u1", "m-u1", "4.90"), t0)
				} else {
					tr.ApplyRated(rated("u1", "m-u1", "4.90"), t0)
					tr.ApplyLedger(ledger("u1", amount, currency), t0.Add(2*time.Minute))
				}
				tr.Advance(t0.Add(time.Hour))
				if !mismatch {
					rec.none(t, "amount_mismatch:u1")
					continue
				}
				m := rec.want(t, "amount_mismatch:u1", contract.StatusOpen)
				if m.RatedAmount != "4.90" || m.LedgerAmount != amount || !m.FirstSeenAt.Equal(t0.Add(2*time.Minute)) {
					t.Fatalf("row %+v", m)
				}
				rec.none(t, "rated_not_ledgered:u1")
			}
		})
	}
	f("equal", "4.90", "USD", false)
	f("equal other scale", "4.900000", "USD", false)
	f("one cent more", "4.91", "USD", true)
	f("smallest difference", "4.900001", "USD", true)
	f("other currency", "4.90", "EUR", true)
}

func TestExplainedUsageIsNotUsageNotRated(t *testing.T) {
	tr, rec := newTestTracker(t)
	tr.ApplyUsage(usage("u1", "m-1", "gpu_hour"), t0)
	tr.ApplyUsage(usage("u1", "m-1", "gpu_hour"), t0) // redelivery
	tr.ApplyUsage(usage("u2", "m-1", "gpu_hour"), t0.Add(time.Second))
	tr.ApplyUsage(usage("u3", "m-3", "gpu_minute"), t0)
	tr.ApplyUsage(usage("u4", "m-4", "gpu_hour_legacy"), t0)
	tr.ApplyRated(rated("u1", "m-1", "4.90"), t0)
	tr.ApplyLedger(ledger("u1", "4.90", "USD"), t0)
	tr.Advance(t0.Add(time.Hour))
	d := rec.want(t, "duplicate_usage:gpu-meter/m-1", contract.StatusOpen)
	if d.UsageID != "u2" || !d.FirstSeenAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("row %+v", d)
	}
	if u := rec.want(t, "unknown_unit:u3", contract.StatusOpen); u.UnitID != "gpu_minute" || u.Currency != "" {
		t.Fatalf("row %+v", u)
	}
	rec.want(t, "unknown_unit:u4", contract.StatusOpen)
	for _, id := range []string{"u1", "u2", "u3", "u4"} {
		rec.none(t, "usage_not_rated:"+id)
	}
	if len(rec.rows) != 3 || tr.Open() != 3 {
		t.Fatalf("rows %d open %d: %v", len(rec.rows), tr.Open(), rec.rows)
	}
}

func TestWatermarkNeverMovesBack(t *testing.T) {
	tr, _ := newTestTracker(t)
	tr.Advance(t0.Add(time.Minute))
	tr.Advance(t0)
	if w := tr.Watermark(); !w.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("watermark %s", w)
	}
}

// TestConflictingUsage: a usage_id that comes again with the same payload
// digest is a redelivery; with another digest (a corrected quantity) or
// under another usage key it is conflicting_usage, showing the first
// quantity (the one rated) and the latest conflicting one, while the
// first usage is reconciled as before.
func TestConflictingUsage(t *testing.T) {
	tr, rec := newTestTracker(t)
	u := usage("u-1", "m-1", "gpu_hour")
	if tr.ApplyUsageDigest(u, 1, t0) || tr.ApplyUsageDigest(u, 1, t0.Add(time.Second)) { // the second a redelivery
		t.Fatal("a first usage or its redelivery reported as a conflict")
	}
	if n := len(rec.rows); n != 0 {
		t.Fatalf("a redelivery raised %v", rec.rows)
	}
	corrected := *u
	corrected.Quantity = "3.500000"
	if !tr.ApplyUsageDigest(&corrected, 2, t0.Add(2*time.Second)) {
		t.Fatal("a corrected usage under the same usage_id not reported as a conflict")
	}
	m := rec.want(t, "conflicting_usage:u-1", contract.StatusOpen)
	if m.Kind != contract.KindConflictingUsage || m.Quantity != "2.000000" || m.ConflictQuantity != "3.500000" || m.UsageID != "u-1" {
		t.Fatalf("conflict row %+v", m)
	}
	// The same usage_id under another usage key is other content too.
	moved := *u
	moved.MeteringID, moved.Quantity = "m-9", "4.000000"
	if !tr.ApplyUsageDigest(&moved, 1, t0.Add(3*time.Second)) {
		t.Fatal("a usage_id under another usage key not reported as a conflict")
	}
	if m := rec.want(t, "conflicting_usage:u-1", contract.StatusOpen); m.ConflictQuantity != "4.000000" || m.Quantity != "2.000000" {
		t.Fatalf("second conflict row %+v", m)
	}
	// The first usage is rated in time: nothing else opens, and the
	// conflict stays open for finance.
	tr.ApplyRated(rated("u-1", "m-1", "4.90"), t0.Add(4*time.Second))
	tr.Advance(t0.Add(10 * time.Minute))
	if _, ok := rec.rows["usage_not_rated:u-1"]; ok {
		t.Fatalf("the first usage is rated: %v", rec.rows)
	}
	rec.want(t, "conflicting_usage:u-1", contract.StatusOpen)
	// An unknown digest (0) never makes a conflict.
	tr.ApplyUsage(&corrected, t0.Add(11*time.Minute))
	if m := rec.rows["conflicting_usage:u-1"]; m.ConflictQuantity != "4.000000" {
		t.Fatalf("a repeat with an unknown digest changed the conflict: %+v", m)
	}
}
