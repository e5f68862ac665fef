package reconcile

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// windowsOf returns the tracker's rows by key, after checking the three
// conservation identities on every one of them.
func windowsOf(t *testing.T, tr *Tracker) map[WindowKey]Window {
	t.Helper()
	out := map[WindowKey]Window{}
	for _, w := range tr.Windows() {
		checkIdentities(t, w)
		out[w.Key] = w
	}
	return out
}

func dec(t *testing.T, s string) decimal.Dec {
	t.Helper()
	d, err := decimal.Parse(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return d
}

func addAll(t *testing.T, ss ...string) decimal.Dec {
	t.Helper()
	var total decimal.Dec
	for _, s := range ss {
		var err error
		if total, err = decimal.Add(total, dec(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	return total
}

func checkIdentities(t *testing.T, w Window) {
	t.Helper()
	for _, n := range []int64{w.Accepted, w.Rejected, w.RatingPending, w.NotRated, w.Rated, w.RatedWithoutUsage, w.Ledgered,
		w.LedgerPending, w.NotLedgered, w.AmountMismatch, w.LedgerEntries, w.LedgerWithoutRated, w.Unexplained} {
		if n < 0 {
			t.Fatalf("negative count in %+v", w)
		}
	}
	if w.Accepted+w.RatedWithoutUsage != w.Rated+w.RatingPending+w.NotRated+w.Rejected {
		t.Fatalf("usage identity broken: %+v", w)
	}
	if w.Rated != w.Ledgered+w.LedgerPending+w.NotLedgered+w.AmountMismatch {
		t.Fatalf("rated identity broken: %+v", w)
	}
	if !decimal.Equal(dec(t, w.RatedAmount), addAll(t, w.LedgeredAmount, w.LedgerPendingAmount, w.NotLedgeredAmount, w.AmountMismatchAmount)) {
		t.Fatalf("rated amount identity broken: %+v", w)
	}
	if w.LedgerEntries != w.Ledgered+w.AmountMismatch+w.LedgerWithoutRated {
		t.Fatalf("ledger identity broken: %+v", w)
	}
	if w.Key.Currency != "" && !decimal.Equal(dec(t, w.LedgerAmount), addAll(t, w.LedgeredAmount, w.AmountMismatchLedgerAmount, w.LedgerWithoutRatedAmount)) {
		// Holds when every entry is posted in the row's currency, as in
		// these tests.
		t.Fatalf("ledger amount identity broken: %+v", w)
	}
}

func key(hour int) WindowKey {
	return WindowKey{TenantID: "t-1", ProductID: "gpuaas", Currency: "USD", Start: t0.Add(time.Duration(hour) * time.Hour).Unix()}
}

func TestWindowBalancedExactTotals(t *testing.T) {
	tr, rec := newTestTracker(t)
	at := t0.Add(10 * time.Minute)
	// u1 ledgered (4.9 posted for 4.90), u2 amount mismatch, u3 pending
	// its ledger, u4 pending its rating, u5 unknown unit, u6 duplicate.
	tr.ApplyUsage(usage("u1", "m-1", "gpu_hour"), at)
	tr.ApplyRated(rated("u1", "m-1", "4.90"), at)
	tr.ApplyLedger(ledger("u1", "4.9", "USD"), at.Add(time.Minute))
	tr.ApplyUsage(usage("u2", "m-2", "gpu_hour"), at)
	tr.ApplyRated(rated("u2", "m-2", "0.10"), at)
	tr.ApplyLedger(ledger("u2", "0.11", "USD"), at.Add(time.Minute))
	tr.ApplyUsage(usage("u3", "m-3", "gpu_hour"), at)
	tr.ApplyRated(rated("u3", "m-3", "0.20"), at)
	tr.ApplyUsage(usage("u4", "m-4", "gpu_hour"), at.Add(time.Minute))
	tr.ApplyUsage(usage("u5", "m-5", "gpu_minute"), at)
	tr.ApplyUsage(usage("u6", "m-1", "gpu_hour"), at)
	tr.ApplyUsage(usage("u6", "m-1", "gpu_hour"), at) // redelivery counts once

	ws := windowsOf(t, tr)
	// unknown unit gpu_minute has no currency: its own row.
	if len(ws) != 2 {
		t.Fatalf("windows %+v", ws)
	}
	w := ws[key(0)]
	want := Window{Key: key(0), Accepted: 5, Rejected: 1, RatingPending: 1, Rated: 3, RatedAmount: "5.20",
		Ledgered: 1, LedgeredAmount: "4.90", LedgerPending: 1, LedgerPendingAmount: "0.20",
		NotLedgeredAmount: "0", AmountMismatch: 1, AmountMismatchAmount: "0.10", AmountMismatchLedgerAmount: "0.11",
		LedgerEntries: 2, LedgerAmount: "5.01", RatedWithoutUsageAmount: "0", LedgerWithoutRatedAmount: "0"}
	want.LastEventAt, want.Version = w.LastEventAt, w.Version
	if w != want {
		t.Fatalf("window\n got %+v\nwant %+v", w, want)
	}
	if u := ws[WindowKey{TenantID: "t-1", ProductID: "gpuaas", Start: key(0).Start}]; u.Accepted != 1 || u.Rejected != 1 {
		t.Fatalf("unknown-unit window %+v", u)
	}

	// Past the graces u4 is not rated and u3 not ledgered: both are
	// mismatches, counted as such, and the window still balances.
	tr.Advance(at.Add(40 * time.Minute))
	w = windowsOf(t, tr)[key(0)]
	if w.RatingPending != 0 || w.NotRated != 1 || w.LedgerPending != 0 || w.NotLedgered != 1 || w.NotLedgeredAmount != "0.20" || !w.Balanced() {
		t.Fatalf("window %+v", w)
	}
	rec.none(t, WindowMismatchID(key(0), 0))

	// Amounts are exact: a thousand lines of 0.001 are 1.000, not a float.
	for i := range 1000 {
		id := fmt.Sprintf("v%d", i)
		tr.ApplyUsage(usage(id, "m-"+id, "gpu_hour"), t0.Add(2*time.Hour))
		tr.ApplyRated(rated(id, "m-"+id, "0.001"), t0.Add(2*time.Hour))
		tr.ApplyLedger(ledger(id, "0.0010", "USD"), t0.Add(2*time.Hour))
	}
	w = windowsOf(t, tr)[key(2)]
	if w.Rated != 1000 || w.RatedAmount != "1.000" || w.LedgeredAmount != "1.000" || w.LedgerAmount != "1.0000" {
		t.Fatalf("window %+v", w)
	}
}

func TestWindowUnbalancedRatedWithoutUsage(t *testing.T) {
	tr, rec := newTestTracker(t)
	tr.ApplyRated(rated("u1", "m-1", "4.90"), t0)
	tr.ApplyLedger(ledger("u1", "4.90", "USD"), t0.Add(time.Minute))
	// Within the rating grace the usage may still come.
	tr.Advance(t0.Add(5*time.Minute + 29*time.Second))
	rec.none(t, WindowMismatchID(key(0), 0))
	if w := windowsOf(t, tr)[key(0)]; w.RatedWithoutUsage != 1 || !w.Balanced() {
		t.Fatalf("window %+v", w)
	}
	tr.Advance(t0.Add(5*time.Minute + 30*time.Second))
	m := rec.want(t, WindowMismatchID(key(0), 0), contract.StatusOpen)
	if m.Kind != contract.KindWindowUnbalanced || m.RatedAmount != "4.90" || m.TenantID != "t-1" || m.ProductID != "gpuaas" ||
		!m.FirstSeenAt.Equal(t0.Add(5*time.Minute)) || m.MismatchID != "window_unbalanced:t-1/gpuaas/USD/2026-11-21T10/p0" {
		t.Fatalf("row %+v", m)
	}
	w := windowsOf(t, tr)[key(0)]
	if w.Unexplained != 1 || w.Balanced() || w.Accepted != 0 || w.Rated != 1 || w.RatedWithoutUsageAmount != "4.90" {
		t.Fatalf("window %+v", w)
	}
	if tr.Open() != 1 {
		t.Fatalf("open %d", tr.Open())
	}
	// The usage arrives late: the window balances and the finding resolves.
	tr.ApplyUsage(usage("u1", "m-1", "gpu_hour"), t0)
	m = rec.want(t, WindowMismatchID(key(0), 0), contract.StatusResolved)
	if !m.FirstSeenAt.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("row %+v", m)
	}
	if w := windowsOf(t, tr)[key(0)]; !w.Balanced() || w.Accepted != 1 || w.RatedWithoutUsage != 0 || w.Ledgered != 1 {
		t.Fatalf("window %+v", w)
	}
	if tr.Open() != 0 {
		t.Fatalf("open %d", tr.Open())
	}
}

func TestWindowUnbalancedLedgerWithoutRated(t *testing.T) {
	tr, rec := newTestTracker(t)
	// A posting for usage that was never rated nor seen: its window is the
	// posting's hour, with no tenant or product known.
	posted := t0.Add(70 * time.Minute)
	tr.ApplyLedger(ledger("u9", "1.25", "USD"), posted)
	orphanKey := WindowKey{Currency: "USD", Start: t0.Add(time.Hour).Unix()}
	tr.Advance(posted.Add(15*time.Minute + 30*time.Second))
	m := rec.want(t, WindowMismatchID(orphanKey, 0), contract.StatusOpen)
	if m.LedgerAmount != "1.25" || m.RatedAmount != "" || m.TenantID != "" {
		t.Fatalf("row %+v", m)
	}
	if w := windowsOf(t, tr)[orphanKey]; w.LedgerWithoutRated != 1 || w.LedgerWithoutRatedAmount != "1.25" || w.Unexplained != 1 {
		t.Fatalf("window %+v", w)
	}
	// Usage and rated line arrive: u9 moves to its usage's window (hour
	// 0, tenant t-1), which balances; the posting's window is empty and
	// balanced again.
	// With the usage, the posting moves to the usage's window, still
	// without rated line.
	tr.ApplyUsage(usage("u9", "m-9", "gpu_hour"), t0)
	rec.want(t, WindowMismatchID(orphanKey, 0), contract.StatusResolved)
	rec.want(t, WindowMismatchID(key(0), 0), contract.StatusOpen)
	tr.ApplyRated(rated("u9", "m-9", "1.25"), t0)
	rec.want(t, WindowMismatchID(key(0), 0), contract.StatusResolved)
	ws := windowsOf(t, tr)
	if w := ws[orphanKey]; w.LedgerEntries != 0 || w.Unexplained != 0 || w.LedgerAmount != "0" {
		t.Fatalf("orphan window %+v", w)
	}
	if w := ws[key(0)]; w.Accepted != 1 || w.Ledgered != 1 || w.LedgeredAmount != "1.25" || !w.Balanced() {
		t.Fatalf("window %+v", w)
	}
	if tr.Open() != 0 {
		t.Fatalf("open %d", tr.Open())
	}
}

func TestTakeWindowsVersions(t *testing.T) {
	tr, _ := newTestTracker(t)
	tr.ApplyUsage(usage("u1", "m-1", "gpu_hour"), t0)
	var got []Window
	take := func() { tr.TakeWindows(func(w *Window) { got = append(got, *w) }) }
	take()
	if len(got) != 1 || got[0].Accepted != 1 {
		t.Fatalf("rows %+v", got)
	}
	take()
	if len(got) != 1 {
		t.Fatalf("clean window taken again: %+v", got)
	}
	tr.ApplyRated(rated("u1", "m-1", "4.90"), t0)
	take()
	if len(got) != 2 || got[1].Version <= got[0].Version || got[1].Rated != 1 {
		t.Fatalf("rows %+v", got)
	}
}

// TestWindowIdentitiesRandom applies random interleavings of usage, rated
// lines and ledger entries, and checks the identities after every step and
// that the final rows do not depend on the order when the watermark does
// not move between them.
func TestWindowIdentitiesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type op struct {
		kind int
		id   string
		at   time.Time
	}
	var ops []op
	for i := range 300 {
		id := fmt.Sprintf("u%d", i)
		at := t0.Add(time.Duration(rng.IntN(180)) * time.Minute)
		if rng.IntN(10) > 0 {
			ops = append(ops, op{0, id, at})
		}
		if rng.IntN(10) > 0 {
			ops = append(ops, op{1, id, at})
		}
		if rng.IntN(10) > 0 {
			ops = append(ops, op{2, id, at.Add(5 * time.Minute)})
		}
	}
	run := func(ops []op) map[WindowKey]Window {
		tr, _ := newTestTracker(t)
		for _, o := range ops {
			switch o.kind {
			case 0:
				tr.ApplyUsage(usage(o.id, "m-"+o.id, "gpu_hour"), o.at)
			case 1:
				tr.ApplyRated(rated(o.id, "m-"+o.id, "2.45"), o.at)
			case 2:
				amt := "2.45"
				if len(o.id)%3 == 0 {
					amt = "2.46"
				}
				tr.ApplyLedger(&contract.LedgerEntry{LedgerEntryID: "le-" + o.id, UsageID: o.id, Amount: amt, Currency: "USD"}, o.at)
			}
			windowsOf(t, tr)
		}
		tr.Advance(t0.Add(6 * time.Hour))
		ws := windowsOf(t, tr)
		for k, w := range ws {
			w.LastEventAt, w.Version = time.Time{}, 0
			ws[k] = w
		}
		return ws
	}
	a := run(ops)
	rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	b := run(ops)
	var unbalanced int
	for k, w := range a {
		if b[k] != w && !(w.Accepted == 0 && w.Rated == 0 && w.LedgerEntries == 0) {
			t.Fatalf("window %v depends on the order:\n%+v\n%+v", k, w, b[k])
		}
		if !w.Balanced() {
			unbalanced++
		}
	}
	if unbalanced == 0 {
		t.Fatal("no unbalanced window generated")
	}
}
