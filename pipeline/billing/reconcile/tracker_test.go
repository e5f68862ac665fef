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

// TestTrackerAtTheEndsOfTime: usage that occurred near either end of the
// times the validator accepts (contract.MinTime, contract.MaxTime) is
// judged as any other. Its redelivery is a redelivery, not late and not
// a conflict; another usage_id on its key is duplicate_usage; and no
// grace passes before the watermark passes it. Near the end, a
// generation and a grace end beyond the largest int64; near the start,
// the watermark less the horizon, and the multiple of the generations'
// span before the usage, lie before the earliest one.
func TestTrackerAtTheEndsOfTime(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2262, 4, 11, 23, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 11, 23, 45, 0, 0, time.UTC),
		contract.MaxTime,
		time.Date(1677, 9, 21, 1, 0, 0, 0, time.UTC),
		contract.MinTime,
	} {
		t.Run(at.Format(time.RFC3339Nano), func(t *testing.T) {
			tr, rec := newTestTracker(t)
			u := usage("u-1", "m-1", "gpu_hour")
			for i := range 2 { // the usage and its redelivery
				if _, late := tr.Late(at); late {
					t.Fatalf("usage %d is late", i)
				}
				if tr.ApplyUsageDigest(u, 1, at) {
					t.Fatalf("usage %d is a conflict: %v", i, rec.rows)
				}
			}
			tr.ApplyRated(rated("u-1", "m-1", "4.90"), at)
			tr.ApplyUsageDigest(usage("u-2", "m-1", "gpu_hour"), 2, at)
			tr.ApplyUsageDigest(usage("u-3", "m-3", "gpu_hour"), 3, at) // not rated (yet)
			tr.Advance(at)
			if m := rec.want(t, "duplicate_usage:gpu-meter/m-1", contract.StatusOpen); m.UsageID != "u-2" || len(rec.rows) != 1 {
				t.Fatalf("rows %v", rec.rows)
			}
		})
	}
}

// TestTrackerPrunedNearMinTime: the claim of usage that occurred just
// after contract.MinTime outlives its usage, pruned once its window is
// past the horizon, until its generation (the first, which starts at the
// earliest int64) ends before the floor.
func TestTrackerPrunedNearMinTime(t *testing.T) {
	tr, rec := newTestTracker(t)
	at := time.Date(1677, 9, 21, 1, 0, 0, 0, time.UTC)
	tr.ApplyUsageDigest(usage("u-1", "m-1", "gpu_hour"), 1, at)
	tr.ApplyRated(rated("u-1", "m-1", "4.90"), at)
	l := ledger("u-1", "4.90", "USD")
	l.MeteringID = "m-1"
	tr.ApplyLedger(l, at)
	tr.Advance(at.Add(WindowSize + DefaultRules().Horizon + time.Minute))
	if n, _ := tr.Tracked(); n != 0 {
		t.Fatalf("%d usage_ids tracked past the horizon", n)
	}
	// Within the horizon of the watermark, in the generation of u-1.
	later := at.Add(2 * time.Hour)
	if _, late := tr.Late(later); late {
		t.Fatal("usage within the horizon is late")
	}
	tr.ApplyUsageDigest(usage("u-2", "m-1", "gpu_hour"), 2, later)
	if m := rec.want(t, "duplicate_usage:gpu-meter/m-1", contract.StatusOpen); m.UsageID != "u-2" {
		t.Fatalf("row %+v", m)
	}
	// Once the floor passes the end of that generation (the first, which
	// ends at 1677-09-21T12:00), the claims in it are forgotten: usage on
	// the key is new again.
	tr.Advance(time.Date(1677, 9, 23, 13, 0, 30, 0, time.UTC))
	tr.ApplyUsageDigest(usage("u-3", "m-1", "gpu_hour"), 3, time.Date(1677, 9, 21, 13, 30, 0, 0, time.UTC))
	if m := rec.want(t, "duplicate_usage:gpu-meter/m-1", contract.StatusOpen); m.UsageID != "u-2" {
		t.Fatalf("usage on a forgotten key is a duplicate: %+v", m)
	}
}

// TestGracesNearMaxTime: a grace that ends after contract.MaxTime never
// passes, even once the watermark reaches contract.MaxTime (no allowed
// lateness), while one that ends before it does.
func TestGracesNearMaxTime(t *testing.T) {
	rules := DefaultRules()
	rules.AllowedLateness = 0
	rec := &recorder{rows: map[string]Mismatch{}}
	tr := NewTracker(rules, testPrices(t).Book, func(m *Mismatch) { rec.rows[m.MismatchID] = *m })
	end := contract.MaxTime
	tr.ApplyUsage(usage("u-early", "m-early", "gpu_hour"), end.Add(-10*time.Minute))
	tr.ApplyUsage(usage("u-1", "m-1", "gpu_hour"), end.Add(-time.Minute))
	tr.ApplyUsage(usage("u-2", "m-2", "gpu_hour"), end.Add(-5*time.Minute))
	tr.ApplyRated(rated("u-2", "m-2", "4.90"), end.Add(-5*time.Minute))
	tr.ApplyRated(rated("u-3", "m-3", "4.90"), end.Add(-time.Minute)) // no usage
	tr.Advance(end)
	if !tr.Watermark().Equal(end) {
		t.Fatalf("watermark %s", tr.Watermark())
	}
	if m := rec.want(t, "usage_not_rated:u-early", contract.StatusOpen); !m.FirstSeenAt.Equal(end.Add(-5 * time.Minute)) {
		t.Fatalf("row %+v", m)
	}
	if len(rec.rows) != 1 {
		t.Fatalf("rows %v", rec.rows)
	}
	if w := tr.Windows(); len(w) != 1 || w[0].Unexplained != 0 || w[0].RatingPending != 1 || w[0].LedgerPending != 2 {
		t.Fatalf("windows %+v", w)
	}
}

// TestDuplicateUsageOfPairs: duplicate_usage is judged on the pair of
// metering_source and metering_id (CONTRACT 5): ("gw/eu", "m-1") and
// ("gw", "eu/m-1") share the usage key gw/eu/m-1 but are two pairs, each
// claimed by its own usage_id, and a second usage_id of each is its own
// duplicate_usage row. A source without a slash keeps the mismatch_id of
// its usage key.
func TestDuplicateUsageOfPairs(t *testing.T) {
	tr, rec := newTestTracker(t)
	pair := func(id, source, meteringID string) *contract.Usage {
		u := usage(id, meteringID, "gpu_hour")
		u.MeteringSource = source
		return u
	}
	tr.ApplyUsage(pair("u-1", "gw/eu", "m-1"), t0)
	tr.ApplyUsage(pair("u-2", "gw", "eu/m-1"), t0)
	if len(rec.rows) != 0 {
		t.Fatalf("two pairs of one usage key: %v", rec.rows)
	}
	tr.ApplyUsage(pair("u-3", "gw/eu", "m-1"), t0.Add(time.Second))
	tr.ApplyUsage(pair("u-4", "gw", "eu/m-1"), t0.Add(2*time.Second))
	if m := rec.want(t, "duplicate_usage:/5/gw/eu/m-1", contract.StatusOpen); m.UsageID != "u-3" || m.MeteringSource != "gw/eu" || m.MeteringID != "m-1" {
		t.Fatalf("row %+v", m)
	}
	if m := rec.want(t, "duplicate_usage:gw/eu/m-1", contract.StatusOpen); m.UsageID != "u-4" || m.MeteringSource != "gw" || m.MeteringID != "eu/m-1" {
		t.Fatalf("row %+v", m)
	}
	if len(rec.rows) != 2 || tr.Open() != 2 {
		t.Fatalf("rows %d, open %d: %v", len(rec.rows), tr.Open(), rec.rows)
	}
}
