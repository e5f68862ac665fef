package reconcile

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSpillingChangesNothing applies the same events to a tracker that
// keeps everything in memory and to trackers whose states and strings
// spill to scratch files, one with no budget at all (every chunk that may
// go is written out at every safe point) and one with a few chunks: the
// rows, the window rows and the state at the end are the same, and the
// spilling trackers did read chunks back.
func TestSpillingChangesNothing(t *testing.T) {
	defer func(n int) { arenaChunk = n }(arenaChunk)
	arenaChunk = 4096 // many chunks of strings
	const n = 30_000  // hundreds of slab chunks of states
	events := manyEvents(n)

	type result struct {
		rows    map[string]Mismatch
		windows []Window
		state   string
		pg      *pager
	}
	run := func(budget int64) result {
		rules := DefaultRules()
		rules.Horizon = time.Hour
		rows := map[string]Mismatch{}
		tr := NewTracker(rules, testPrices(t).Book, func(m *Mismatch) { rows[fmt.Sprint(m.MismatchID, "@", m.Version)] = *m })
		var pg *pager
		if budget >= 0 {
			pg = newPager(budget, t.TempDir())
			tr.spill(pg)
			defer tr.close()
		}
		var windows []Window
		for i, e := range events {
			if pg.over() {
				pg.trim(true) // a safe point, as the reconciler's
			}
			e(tr)
			if i%50 == 0 {
				tr.TakeWindows(func(w *Window) { windows = append(windows, *w) })
			}
		}
		tr.TakeWindows(func(w *Window) { windows = append(windows, *w) })
		if budget >= 0 && (tr.pruned < n/4 || pg.freed == 0) {
			t.Fatalf("%d usage_ids dropped, %d chunks of strings freed: too few to say anything", tr.pruned, pg.freed)
		}
		return result{rows, windows, tr.dump(), pg}
	}
	want := run(-1)
	if len(want.rows) < n/10 || len(want.windows) == 0 {
		t.Fatalf("%d rows and %d window rows: the events raise too little to say anything", len(want.rows), len(want.windows))
	}
	for _, budget := range []int64{0, 3*stateBytes + 8*4096} {
		got := run(budget)
		if got.pg.reads == 0 || got.pg.writes == 0 {
			t.Fatalf("budget %d: %d chunks read back and %d written: nothing spilled", budget, got.pg.reads, got.pg.writes)
		}
		if !reflect.DeepEqual(got.rows, want.rows) {
			t.Fatalf("budget %d: rows differ: %d against %d", budget, len(got.rows), len(want.rows))
		}
		if !reflect.DeepEqual(got.windows, want.windows) {
			t.Fatalf("budget %d: window rows differ: %d against %d", budget, len(got.windows), len(want.windows))
		}
		if got.state != want.state {
			t.Fatalf("budget %d: states differ:\n%.3000s\nagainst\n%.3000s", budget, got.state, want.state)
		}
		t.Logf("budget %d: %d chunks read back, %d written, %d chunks of strings freed; %d rows", budget, got.pg.reads, got.pg.writes, got.pg.freed, len(got.rows))
	}
}

// TestBoundedAdvanceChangesNothing applies the same events to a tracker
// without bound and to one whose calls stop after a few rows
// (Tracker.SetFull), resumed until it is no longer Behind before the
// next event, as the reconciler's rounds do: the same rows come out in
// the same order, and the windows and the state end the same.
func TestBoundedAdvanceChangesNothing(t *testing.T) {
	events := manyEvents(20_000)
	type result struct {
		rows    []Mismatch
		windows []Window
		state   string
		resumes int
	}
	run := func(bound int) result {
		rules := DefaultRules()
		rules.Horizon = time.Hour
		var r result
		since := 0
		tr := NewTracker(rules, testPrices(t).Book, func(m *Mismatch) { r.rows = append(r.rows, *m); since++ })
		if bound > 0 {
			tr.SetFull(func() bool { return since >= bound })
		}
		for i, e := range events {
			for tr.Behind() {
				since = 0
				r.resumes++
				tr.Resume()
			}
			since = 0
			e(tr)
			if i%50 == 0 {
				tr.TakeWindows(func(w *Window) { r.windows = append(r.windows, *w) })
			}
		}
		for tr.Behind() {
			since = 0
			r.resumes++
			tr.Resume()
		}
		tr.TakeWindows(func(w *Window) { r.windows = append(r.windows, *w) })
		r.state = tr.dump()
		return r
	}
	want, got := run(0), run(3)
	if got.resumes < 100 {
		t.Fatalf("resumed %d times: the bound held back too little to say anything", got.resumes)
	}
	if !reflect.DeepEqual(got.rows, want.rows) {
		t.Fatalf("rows differ: %d against %d", len(got.rows), len(want.rows))
	}
	// Window rows are taken at other moments of their windows' changes
	// (every 50 events), so the two runs take other versions of them;
	// a version is one content, and the latest ones are the same.
	versions := map[string]Window{}
	latest := func(rows []Window) map[WindowKey]Window {
		last := map[WindowKey]Window{}
		for _, w := range rows {
			v := fmt.Sprint(w.Key, "@", w.Version)
			if o, ok := versions[v]; ok && !reflect.DeepEqual(o, w) {
				t.Fatalf("two contents of window version %s:\n%+v\n%+v", v, o, w)
			}
			versions[v] = w
			if o, ok := last[w.Key]; !ok || w.Version > o.Version {
				last[w.Key] = w
			}
		}
		return last
	}
	if a, b := latest(got.windows), latest(want.windows); !reflect.DeepEqual(a, b) {
		t.Fatalf("latest window rows differ: %d against %d", len(a), len(b))
	}
	if got.state != want.state {
		t.Fatalf("states differ:\n%.3000s\nagainst\n%.3000s", got.state, want.state)
	}
	t.Logf("%d rows, %d window rows, resumed %d times", len(got.rows), len(got.windows), got.resumes)
}

// manyEvents returns n events and more of usage, rated lines and ledger
// entries: usage that settles (the first quarter all of it), usage_ids
// that embed their metering_id, conflicts, amounts that differ, usage
// never rated, and at the end a watermark past every grace and, with a
// horizon of an hour, past every window.
func manyEvents(n int) []func(*Tracker) {
	type event = func(*Tracker)
	rng := rand.New(rand.NewPCG(7, 8))
	var events []event
	for i := range n {
		at := t0.Add(time.Duration(i) * 400 * time.Millisecond)
		id := fmt.Sprintf("u%d", rng.IntN(n*3/4))
		skew := -time.Duration(rng.IntN(600)) * time.Second
		if i%2 == 0 || i < n/4 {
			// Usage that settles: the horizon drops it, and the chunks
			// of its strings are freed (the first quarter settles
			// whole).
			sid := fmt.Sprintf("s%d", i)
			events = append(events,
				func(tr *Tracker) { tr.ApplyUsage(usage(sid, "m-"+sid, "gpu_hour"), at) },
				func(tr *Tracker) { tr.ApplyRated(rated(sid, "m-"+sid, "4.90"), at) },
				func(tr *Tracker) { tr.ApplyLedger(ledger(sid, "4.90", "USD"), at) })
			if i < n/4 {
				continue
			}
		}
		switch k := rng.IntN(10); {
		case k < 3:
			events = append(events, func(tr *Tracker) { tr.ApplyUsage(usage(id, "m-"+id, "gpu_hour"), at.Add(skew)) })
		case k < 5:
			// A usage_id ending with its metering_id, its quantity one
			// that is copied rather than packed.
			events = append(events, func(tr *Tracker) {
				u := usage("usg-m-"+id, "m-"+id, "gpu_hour")
				u.Quantity = "01.5"
				tr.ApplyUsage(u, at.Add(skew))
			})
		case k == 5:
			// Another quantity under a usage_id seen: conflicting_usage.
			events = append(events, func(tr *Tracker) {
				u := usage(id, "m-"+id, "gpu_hour")
				u.Quantity = "2.25"
				tr.ApplyUsageDigest(u, 99, at.Add(skew))
			})
		case k < 8:
			events = append(events, func(tr *Tracker) { tr.ApplyRated(rated(id, "m-"+id, "4.90"), at.Add(skew)) })
		case k == 8:
			events = append(events, func(tr *Tracker) { tr.ApplyRated(rated("usg-m-"+id, "m-"+id, "4.9"), at.Add(skew)) })
		default:
			amount := "4.90"
			if rng.IntN(8) == 0 {
				amount = "4.91"
			}
			events = append(events, func(tr *Tracker) { tr.ApplyLedger(ledger(id, amount, "USD"), at.Add(skew)) })
		}
	}
	// Then the watermark passes every grace and, with a horizon of an
	// hour, the windows close and their settled usage is dropped.
	return append(events, func(tr *Tracker) { tr.Advance(t0.Add(48 * time.Hour)) })
}

// TestSpillDirChecked: a reconciler whose scratch directory cannot hold
// files does not start.
func TestSpillDirChecked(t *testing.T) {
	missing := t.TempDir() + "/missing"
	if err := newPager(1, missing).check(); err == nil || !strings.Contains(err.Error(), "-billing.spillDir") {
		t.Fatalf("check of %s: %v", missing, err)
	}
	if err := newPager(1, t.TempDir()).check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSpilledOutOfOrder: 400,000 usages applied in order with their
// states spilled beyond a budget of a tenth of them, then their rated
// lines in a random order, as a ledger that posts by tenant would: per
// op one rated line, most of whose states are in the file. The order-
// of-arrival case (rated lines in the order of their usage) reads each
// chunk back once.
func BenchmarkSpilledOutOfOrder(b *testing.B) {
	const n = 400_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("usg-run1-vm-%07d:r1:%d", i, i%7)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	order := rng.Perm(n)
	at := t0
	tr := NewTracker(DefaultRules(), testPrices(b).Book, func(*Mismatch) {})
	pg := newPager(n/10*160, b.TempDir())
	tr.spill(pg)
	defer tr.close()
	for i, id := range ids {
		pg.trim(true)
		tr.ApplyUsage(usage(id, id, "gpu_hour"), at.Add(time.Duration(i)*time.Millisecond))
	}
	reads := pg.reads
	b.ResetTimer()
	for i := range b.N {
		id := ids[order[i%n]]
		pg.trim(true)
		tr.ApplyRated(rated(id, id, "4.90"), at.Add(time.Duration(n)*time.Millisecond))
	}
	b.ReportMetric(float64(pg.reads-reads)/float64(b.N), "reads/op")
}
