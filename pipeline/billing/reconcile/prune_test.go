package reconcile

import (
	"fmt"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

func TestHorizonDropsSettledUsage(t *testing.T) {
	rec := &recorder{rows: map[string]Mismatch{}}
	rules := DefaultRules()
	rules.Horizon = 2 * time.Hour
	tr := NewTracker(rules, testPrices(t).Book, func(m *Mismatch) { rec.rows[m.MismatchID] = *m })

	at := t0.Add(10 * time.Minute)
	for _, id := range []string{"a", "b", "c"} {
		tr.ApplyUsage(usage(id, "m-"+id, "gpu_hour"), at)
		tr.ApplyRated(rated(id, "m-"+id, "4.90"), at)
		tr.ApplyLedger(ledger(id, "4.90", "USD"), at.Add(time.Minute))
	}
	tr.ApplyUsage(usage("open", "m-open", "gpu_hour"), at) // rated, never posted (yet)
	tr.ApplyRated(rated("open", "m-open", "4.90"), at)
	tr.ApplyUsage(usage("bad", "m-bad", "gpu_legacy_unit"), at) // refused: settled
	before := windowsOf(t, tr)[key(0)]
	if n, w := tr.Tracked(); n != 5 || w != 2 {
		t.Fatalf("tracked %d usage, %d windows", n, w)
	}

	// The watermark reaches the end of hour 0 + 2h: the window closes.
	tr.Advance(t0.Add(3*time.Hour - time.Second + rules.AllowedLateness))
	if n, _ := tr.Tracked(); n != 5 {
		t.Fatalf("dropped before the horizon: %d left", n)
	}
	tr.Advance(t0.Add(3*time.Hour + rules.AllowedLateness))
	if n, w := tr.Tracked(); n != 1 || w != 1 {
		t.Fatalf("tracked %d usage, %d windows; want the unsettled one and its window", n, w)
	}
	if p, late := tr.Pruned(); p != 4 || late != 0 {
		t.Fatalf("pruned %d, late %d", p, late)
	}
	rec.want(t, "rated_not_ledgered:open", contract.StatusOpen)
	after := windowsOf(t, tr)[key(0)]
	before.LastEventAt, before.Version = after.LastEventAt, after.Version
	before.NotLedgered, before.LedgerPending = 1, 0
	before.NotLedgeredAmount, before.LedgerPendingAmount = "4.90", "0"
	if after != before {
		t.Fatalf("window changed by the sweep:\n got %+v\nwant %+v", after, before)
	}

	// A redelivered usage of a dropped usage_id is still recognised (the
	// usage keys are kept): nothing changes.
	tr.ApplyUsage(usage("a", "m-a", "gpu_hour"), at)
	if n, _ := tr.Tracked(); n != 1 {
		t.Fatalf("redelivery tracked again: %d", n)
	}

	// The late posting settles "open"; its window row is still held, so
	// it is counted, and the next sweep drops both.
	tr.ApplyLedger(ledger("open", "4.90", "USD"), t0.Add(3*time.Hour))
	rec.want(t, "rated_not_ledgered:open", contract.StatusResolved)
	if w := windowsOf(t, tr)[key(0)]; w.Ledgered != 4 || w.NotLedgered != 0 || w.LedgeredAmount != "19.60" {
		t.Fatalf("window %+v", w)
	}
	tr.Advance(t0.Add(4*time.Hour + rules.AllowedLateness))
	if n, w := tr.Tracked(); n != 0 || w != 0 {
		t.Fatalf("tracked %d usage, %d windows", n, w)
	}
	if _, ok := tr.mismatches[mismatchKey{contract.KindRatedNotLedgered, "open"}]; ok {
		t.Fatal("resolved mismatch of a dropped usage_id kept")
	}

	// A rated line for the closed, dropped window is not counted anywhere
	// (its row is final); it still raises what it raises.
	var rows []Window
	tr.TakeWindows(nil)
	tr.ApplyRated(rated("ghost", "m-ghost", "1.00"), at)
	tr.TakeWindows(func(w *Window) { rows = append(rows, *w) })
	if _, late := tr.Pruned(); late != 1 || len(rows) != 0 {
		t.Fatalf("late %d, rows %+v", late, rows)
	}
}

// TestHorizonIsDeterministic runs the same events through a tracker that
// prunes and one that never does: every mismatch row and every window row
// they write is the same.
func TestHorizonIsDeterministic(t *testing.T) {
	run := func(horizon time.Duration) (map[string]Mismatch, map[WindowKey]Window) {
		rec := map[string]Mismatch{}
		rules := DefaultRules()
		rules.Horizon = horizon
		tr := NewTracker(rules, testPrices(t).Book, func(m *Mismatch) { rec[m.MismatchID] = *m })
		rows := map[WindowKey]Window{}
		for h := range 48 {
			at := t0.Add(time.Duration(h) * time.Hour)
			for i := range 20 {
				id := fmt.Sprintf("%d-%c", h, 'a'+i)
				tr.ApplyUsage(usage(id, "m-"+id, "gpu_hour"), at)
				if i != 3 {
					tr.ApplyRated(rated(id, "m-"+id, "4.90"), at)
				}
				switch i {
				case 5: // never posted
				case 7:
					tr.ApplyLedger(ledger(id, "4.91", "USD"), at.Add(time.Minute))
				default:
					tr.ApplyLedger(ledger(id, "4.90", "USD"), at.Add(time.Minute))
				}
			}
			tr.TakeWindows(func(w *Window) { rows[w.Key] = *w })
		}
		return rec, rows
	}
	m1, w1 := run(3 * time.Hour)
	m2, w2 := run(1000 * time.Hour)
	if len(m1) != len(m2) || len(w1) != len(w2) {
		t.Fatalf("%d/%d mismatches, %d/%d windows", len(m1), len(m2), len(w1), len(w2))
	}
	for k, m := range m2 {
		if m1[k] != m {
			t.Fatalf("%s: %+v vs %+v", k, m1[k], m)
		}
	}
	for k, w := range w2 {
		if w1[k] != w {
			t.Fatalf("%v: %+v vs %+v", k, w1[k], w)
		}
	}
}
