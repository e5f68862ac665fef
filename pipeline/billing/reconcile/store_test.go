package reconcile

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/driftline/driftline/pipeline/contract"
)

// TestTableAgainstAMap inserts and removes keys at random in a table and
// in a map, with a hash that collides often, and finds every key of the
// map (and none other) in the table.
func TestTableAgainstAMap(t *testing.T) {
	for _, buckets := range []uint64{1, 7, 1 << 20} {
		rng := rand.New(rand.NewPCG(1, buckets))
		keys := make([]int, 5000) // slot -> key
		// Hashes that collide often, in their top bits (a table's index).
		hash := func(i slot) uint64 { return (uint64(keys[i]) % buckets) << 40 }
		var tb table
		in := map[int]slot{}
		var free []slot
		for range 40000 {
			k := rng.IntN(3000)
			if i, ok := in[k]; ok && rng.IntN(2) == 0 {
				tb.remove(hash(i), i)
				delete(in, k)
				free = append(free, i)
				continue
			}
			if _, ok := in[k]; !ok {
				var i slot
				if n := len(free); n > 0 {
					i, free = free[n-1], free[:n-1]
				} else {
					i = slot(len(in))
				}
				keys[i] = k
				tb.insert(hash(i), i)
				in[k] = i
			}
		}
		if tb.n != len(in) {
			t.Fatalf("buckets %d: table holds %d, map %d", buckets, tb.n, len(in))
		}
		for k := range 3000 {
			want, ok := in[k]
			got, found := tb.find((uint64(k)%buckets)<<40, func(i slot) bool { return keys[i] == k })
			if ok != found || (ok && got != want) {
				t.Fatalf("buckets %d: key %d: found %v at %d, want %v at %d", buckets, k, found, got, ok, want)
			}
		}
	}
}

// TestArenaCompacts drops most strings and checks that compaction keeps
// the others intact.
func TestArenaCompacts(t *testing.T) {
	tr := NewTracker(DefaultRules(), testPrices(t).Book, func(*Mismatch) {})
	for i := range 100000 {
		s := tr.state(fmt.Sprintf("usage-%06d", i))
		tr.describeFrom(s, "src", fmt.Sprintf("meter-%06d-%0100d", i, i), "t", "p", "u", "1.5")
	}
	for i := range 100000 {
		if i%10 != 0 {
			tr.states.remove(&tr.strs, tr.states.find(&tr.strs, fmt.Sprintf("usage-%06d", i)))
		}
	}
	before := len(tr.strs.chunks)
	tr.states.compact(&tr.strs)
	if after := len(tr.strs.chunks); after*4 > before {
		t.Fatalf("arena of %d chunks compacted to %d", before, after)
	}
	for i := 0; i < 100000; i += 10 {
		s := tr.states.find(&tr.strs, fmt.Sprintf("usage-%06d", i))
		if s == nil || tr.strs.get(s.meterID) != fmt.Sprintf("meter-%06d-%0100d", i, i) || tr.strs.get(s.quantity) != "1.5" {
			t.Fatalf("usage %d after compaction: %+v", i, s)
		}
	}
	if n, _ := tr.Tracked(); n != 10000 {
		t.Fatalf("tracked %d", n)
	}
}

// TestClaimsOutliveTheirUsage checks that a usage key is judged the same
// whether its usage is still held or dropped by the horizon, until the
// key is forgotten; and that usage older than the horizon is late.
func TestClaimsOutliveTheirUsage(t *testing.T) {
	rec := &recorder{rows: map[string]Mismatch{}}
	rules := DefaultRules()
	rules.Horizon = 8 * time.Hour // generations of claims 2h wide
	tr := NewTracker(rules, testPrices(t).Book, func(m *Mismatch) { rec.rows[m.MismatchID] = *m })
	dup := MismatchID(contract.KindDuplicateUsage, "gpu-meter/m-a")

	at := t0.Add(10 * time.Minute)
	tr.ApplyUsage(usage("a", "m-a", "gpu_hour"), at)
	tr.ApplyRated(rated("a", "m-a", "4.90"), at)
	tr.ApplyLedger(ledger("a", "4.90", "USD"), at.Add(time.Minute))
	tr.Advance(t0.Add(8*time.Hour + 20*time.Minute + rules.AllowedLateness))
	if n, _ := tr.Tracked(); n != 1 {
		t.Fatalf("tracked %d before the horizon", n)
	}
	tr.ApplyUsage(usage("a2", "m-a", "gpu_hour"), t0.Add(25*time.Minute)) // a held: a duplicate
	rec.want(t, dup, contract.StatusOpen)

	// Hour 0 closes at 9h: a (settled) and a2 (refused) are dropped, a's
	// claim moves to its generation [0h, 2h).
	tr.Advance(t0.Add(9*time.Hour + rules.AllowedLateness))
	if n, _ := tr.Tracked(); n != 0 {
		t.Fatalf("tracked %d; want none (a settled, a2 refused)", n)
	}
	if n := tr.claims.Claims(); n != 1 {
		t.Fatalf("%d claims in the generations, want a's", n)
	}
	tr.ApplyUsage(usage("a3", "m-a", "gpu_hour"), t0.Add(61*time.Minute)) // a dropped: still a duplicate
	if m := rec.rows[dup]; m.UsageID != "a3" {
		t.Fatalf("duplicate of a dropped usage: %+v", m)
	}
	before := len(rec.rows)
	tr.ApplyUsage(usage("a", "m-a", "gpu_hour"), at) // before 1h: late, changes nothing
	if _, late := tr.Late(at); !late || len(rec.rows) != before || tr.lateUsage != 1 {
		t.Fatalf("late usage: late %d, rows %d -> %d", tr.lateUsage, before, len(rec.rows))
	}

	// Once the watermark less the horizon reaches the end of a's
	// generation, the claim is forgotten.
	tr.Advance(t0.Add(10*time.Hour + rules.AllowedLateness))
	if n := tr.claims.Claims(); n != 0 {
		t.Fatalf("%d claims kept past the horizon", n)
	}
}

// TestReplayRestoresTheSameState applies a history twice, once with the
// windows taken as the live reconciler's flushes take them and once in
// one go as a restore replays it, and compares the whole tracker state.
func TestReplayRestoresTheSameState(t *testing.T) {
	type event struct {
		kind int
		id   string
		at   time.Time
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var events []event
	for i := range 3000 {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		id := fmt.Sprintf("u%d", rng.IntN(2500))
		events = append(events, event{rng.IntN(6), id, at.Add(-time.Duration(rng.IntN(600)) * time.Second)})
	}
	run := func(flushEvery int) *Tracker {
		rules := DefaultRules()
		rules.Horizon = time.Hour
		tr := NewTracker(rules, testPrices(t).Book, func(*Mismatch) {})
		for i, e := range events {
			switch e.kind {
			case 0:
				tr.ApplyUsage(usage(e.id, "m-"+e.id[:len(e.id)-1], "gpu_hour"), e.at)
			case 1:
				tr.ApplyRated(rated(e.id, "m-"+e.id, "4.90"), e.at)
			case 2:
				tr.ApplyLedger(ledger(e.id, "4.90", "USD"), e.at)
			case 3:
				// A usage_id that ends with its metering_id (kept as a
				// reference into the usage_id), its quantity one that
				// is copied rather than packed ("01.5").
				u := usage("usg-m-"+e.id, "m-"+e.id, "gpu_hour")
				u.Quantity = "01.5"
				tr.ApplyUsage(u, e.at)
			case 4:
				tr.ApplyRated(rated("usg-m-"+e.id, "m-"+e.id, "4.9"), e.at)
			default:
				l := ledger("usg-m-"+e.id, "4.900", "USD")
				l.MeteringID = "m-" + e.id
				tr.ApplyLedger(l, e.at)
			}
			if flushEvery > 0 && i%flushEvery == 0 {
				tr.TakeWindows(nil)
			}
		}
		return tr
	}
	lt := run(37)
	suffixes := 0
	lt.states.each(func(s *usageState) {
		if strings.HasPrefix(lt.strs.get(s.id), "usg-") && s.meterID&tagMask == suffixTag {
			suffixes++
		}
	})
	if suffixes == 0 {
		t.Fatal("no metering_id kept inside its usage_id")
	}
	live, replay := lt.dump(), run(0).dump()
	if !strings.Contains(live, "usage usg-m-u") || !strings.Contains(live, "qty=01.5") {
		t.Fatalf("no usage_id ending with its metering_id in the state:\n%s", live)
	}
	if live != replay {
		t.Fatalf("live state:\n%s\nreplayed:\n%s", live, replay)
	}
	if len(live) < 1000 {
		t.Fatalf("state too small to say anything:\n%s", live)
	}
}

// dump describes the whole state of t in a canonical text: what a restore
// must rebuild, without the slots, numbers and arena offsets it happens to
// use.
func (t *Tracker) dump() string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	id := func(r stateRef) string {
		if s := t.states.get(r); s != nil {
			return t.strs.get(s.id)
		}
		return "-"
	}
	t.states.each(func(s *usageState) {
		win := ""
		if s.win != 0 {
			win = fmt.Sprint(t.wins[s.win].key)
		}
		d := t.desc(s)
		add("usage %s meter=%s/%s qty=%s conflict=%s tenant=%s product=%s unit=%s cur=%s at=%d reg=%v/%d lingering=%v digest=%x claims=%v seen=%v explained=%v overdue=%v,%v,%v,%v win=%s rated=%v/%s/%d/%s ledger=%v/%s/%d/%s",
			t.strs.get(s.id), t.intern.str(d.source), t.strs.get(s.meterID), t.strs.get(s.quantity), t.strs.get(t.states.conflictQuantity(s)),
			t.intern.str(d.tenant), t.intern.str(d.product), t.intern.str(d.unit), t.intern.str(d.currency), s.at, s.is(registered), s.regStart(), s.is(lingering),
			s.digest, s.is(claimsKey), s.is(usageSeen), s.is(explained), s.is(ratingOverdue), s.is(ledgerOverdue), s.is(ratedOrphanOverdue), s.is(ledgerOrphanOverdue), win,
			s.is(ratedOK), t.strs.get(s.rated.amount), s.rated.at, t.intern.str(d.ratedCur),
			s.is(ledgerOK), t.strs.get(s.ledger.amount), s.ledger.at, t.intern.str(d.ledgerCur))
		for _, kind := range usageKinds {
			if m, ok := t.mget(kind, s); ok {
				add("mismatch %s:%s %+v", kind, t.strs.get(s.id), m)
			}
		}
	})
	for k, m := range t.mismatches {
		add("mismatch %s %+v", k, m)
	}
	for _, w := range t.windows {
		add("window %+v live=%d unbalanced=%v", t.row(w), w.live, w.unbalanced)
	}
	for _, g := range t.claims.List {
		add("claims from %d: %d", g.Start, g.Claims())
	}
	for name, h := range map[string]*graces{"rating": &t.ratingDue, "ledger": &t.ledgerDue, "ratedOrphan": &t.ratedOrphanDue, "ledgerOrphan": &t.ledgerOrphanDue} {
		for d := range h.all() {
			add("due %s %d %s", name, d.at, id(d.ref))
		}
	}
	for start := range t.byStart {
		add("sweep %d", start)
	}
	for _, r := range t.lingering {
		add("linger %s", id(r))
	}
	slices.Sort(lines)
	add("newest %s watermark %s open %d pruned %d late %d lateUsage %d swept %d", t.newest, t.watermark, t.open, t.pruned, t.late, t.lateUsage, t.sweptHour)
	return strings.Join(lines, "\n")
}

// TestArenaPacksDecimalsAndSuffixes checks the forms of an arena string
// other than a copy: decimals packed in the reference, printed back byte
// for byte, and suffixes of another string, kept through a compaction.
func TestArenaPacksDecimalsAndSuffixes(t *testing.T) {
	var a arena
	for _, s := range []string{"0", "1.5", "1.50", "-0.000001", "12.345678", "144115188075855871", "-144115188075855872", "0.000000000000000001"} {
		r := a.putDec(s)
		if r&decTag == 0 {
			t.Errorf("%q not packed", s)
		}
		if got := a.get(r); got != s {
			t.Errorf("%q packed reads %q", s, got)
		}
	}
	for _, s := range []string{"01", "-0", "1.", ".5", "+1", "1e3", "144115188075855872", "9223372036854775807", "abc", "0.0000000000000000001"} {
		r := a.putDec(s)
		if r&decTag != 0 {
			t.Errorf("%q packed", s)
		}
		if got := a.get(r); got != s {
			t.Errorf("%q kept reads %q", s, got)
		}
	}
	if a.putDec("") != 0 {
		t.Error("empty string kept")
	}
	id := a.put("usg-run-prov-7:r1:2")
	for _, s := range []string{"prov-7:r1:2", "2", "usg-run-prov-7:r1:2"} {
		r := a.putSuffix(id, s)
		if r&tagMask != suffixTag || a.get(r) != s {
			t.Errorf("suffix %q: %x reads %q", s, r, a.get(r))
		}
	}
	for _, s := range []string{"prov-7:r1:", "x-usg-run-prov-7:r1:2", "other"} {
		if r := a.putSuffix(id, s); r&tagMask != 0 || a.get(r) != s {
			t.Errorf("not a suffix %q: %x reads %q", s, r, a.get(r))
		}
	}

	tr := NewTracker(DefaultRules(), testPrices(t).Book, func(*Mismatch) {})
	for i := range 100000 {
		s := tr.state(fmt.Sprintf("usg-%06d-meter-%06d", i, i))
		tr.describeFrom(s, "src", fmt.Sprintf("meter-%06d", i), "t", "p", "u", fmt.Sprintf("%d.%06d", i, i))
		if s.meterID&tagMask != suffixTag || s.quantity&decTag == 0 {
			t.Fatalf("usage %d: meter %x quantity %x", i, s.meterID, s.quantity)
		}
	}
	for i := range 100000 {
		if i%10 != 0 {
			tr.states.remove(&tr.strs, tr.states.find(&tr.strs, fmt.Sprintf("usg-%06d-meter-%06d", i, i)))
		}
	}
	tr.strs.size += 8 * arenaChunk // the ids alone are too few to make it wasteful
	before := len(tr.strs.chunks)
	tr.states.compact(&tr.strs)
	if after := len(tr.strs.chunks); after >= before {
		t.Fatalf("arena of %d chunks compacted to %d", before, after)
	}
	for i := 0; i < 100000; i += 10 {
		s := tr.states.find(&tr.strs, fmt.Sprintf("usg-%06d-meter-%06d", i, i))
		if s == nil || s.meterID&tagMask != suffixTag || tr.strs.get(s.meterID) != fmt.Sprintf("meter-%06d", i) || tr.strs.get(s.quantity) != fmt.Sprintf("%d.%06d", i, i) {
			t.Fatalf("usage %d after compaction: %+v", i, s)
		}
	}
}

// TestUsageStateSize keeps the usage state at the size the memory figures
// of bench/billing are measured with: a field added grows every usage_id
// held.
func TestUsageStateSize(t *testing.T) {
	if n := unsafe.Sizeof(usageState{}); n != 120 {
		t.Fatalf("usageState is %d bytes, want 120", n)
	}
}

// TestDescsWith checks the memoized steps of descs.with against numbering
// each desc anew: a step memoized for one currency is not taken for
// another, and every desc keeps one number.
func TestDescsWith(t *testing.T) {
	ds := newDescs()
	rng := rand.New(rand.NewPCG(7, 7))
	refs := []descRef{0}
	for range 20000 {
		r := refs[rng.IntN(len(refs))]
		f := curField(rng.IntN(3))
		v := sym(rng.IntN(4))
		want := ds.all[r].withCurrency(f, v)
		got := ds.with(r, f, v)
		if ds.all[got] != want {
			t.Fatalf("with(%d, %d, %d) = %+v, want %+v", r, f, v, ds.all[got], want)
		}
		if ds.ref(want) != got {
			t.Fatalf("desc %+v has numbers %d and %d", want, got, ds.ref(want))
		}
		if rng.IntN(4) == 0 {
			d := ds.all[got]
			d.tenant = sym(rng.IntN(8))
			refs = append(refs, ds.ref(d))
		}
		refs = append(refs, got)
	}
	if len(ds.all) != len(ds.ids) {
		t.Fatalf("%d descs, %d numbers", len(ds.all), len(ds.ids))
	}
}

// Deadlines dropped before their time because their wait ended change
// nothing: a tracker that drops them from 64 deadlines on emits the rows
// and windows of one that never drops them and ends in the same state,
// with fewer deadlines held.
func TestDroppedGracesChangeNothing(t *testing.T) {
	type event func(*Tracker)
	use := func(id string, at time.Time) event {
		return func(tr *Tracker) { tr.ApplyUsage(usage(id, "m-"+id, "gpu_hour"), at) }
	}
	rate := func(id string, at time.Time) event {
		return func(tr *Tracker) { tr.ApplyRated(rated(id, "m-"+id, "4.90"), at) }
	}
	post := func(id, amount string, at time.Time) event {
		return func(tr *Tracker) { tr.ApplyLedger(ledger(id, amount, "USD"), at) }
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 3000
	var first, second []event
	for i := range n {
		// Usage and its posting before any rated line, as a catch-up
		// after the rater was away applies them: 3,000 usages within
		// four minutes, so their graces are still running when the rated
		// lines come. One posting in ten is of another amount.
		at := t0.Add(time.Duration(i) * 80 * time.Millisecond)
		id := fmt.Sprintf("u%d", i)
		first = append(first, use(id, at))
		switch rng.IntN(10) {
		case 0:
		case 1:
			first = append(first, post(id, "4.91", at.Add(time.Minute)))
		default:
			first = append(first, post(id, "4.90", at.Add(time.Minute)))
		}
		if rng.IntN(20) > 0 {
			second = append(second, rate(id, at))
		}
		// Rated lines before their usage, and before their posting.
		rid := fmt.Sprintf("r%d", i)
		first = append(first, rate(rid, at))
		if rng.IntN(3) > 0 {
			second = append(second, use(rid, at))
		}
		if rng.IntN(3) > 0 {
			second = append(second, post(rid, "4.90", at.Add(time.Minute)))
		}
	}
	rng.Shuffle(len(second), func(i, j int) { second[i], second[j] = second[j], second[i] })
	// Then every grace passes: what is still missing opens its mismatch.
	events := append(append(first, second...), func(tr *Tracker) { tr.Advance(t0.Add(time.Hour)) })
	type result struct {
		tr      *Tracker
		rows    map[string]Mismatch
		windows []Window
		held    int
	}
	run := func(dropFrom int) result {
		rows := map[string]Mismatch{}
		tr := NewTracker(DefaultRules(), testPrices(t).Book, func(m *Mismatch) { rows[fmt.Sprint(m.MismatchID, "@", m.Version)] = *m })
		tr.graceDropMin = dropFrom
		var windows []Window
		for _, e := range events {
			e(tr)
			tr.TakeWindows(func(w *Window) { windows = append(windows, *w) })
		}
		held := tr.ratingDue.Len() + tr.ledgerDue.Len() + tr.ratedOrphanDue.Len() + tr.ledgerOrphanDue.Len()
		return result{tr, rows, windows, held}
	}
	dropping, keeping := run(64), run(math.MaxInt)
	if len(keeping.rows) < n/2 {
		t.Fatalf("only %d rows: the events raise too little to say anything", len(keeping.rows))
	}
	if !reflect.DeepEqual(dropping.rows, keeping.rows) {
		t.Fatalf("rows differ: %d against %d", len(dropping.rows), len(keeping.rows))
	}
	if !reflect.DeepEqual(dropping.windows, keeping.windows) {
		t.Fatalf("window rows differ: %d against %d", len(dropping.windows), len(keeping.windows))
	}
	withoutDue := func(s string) string {
		return strings.Join(slices.DeleteFunc(strings.Split(s, "\n"), func(l string) bool { return strings.HasPrefix(l, "due ") }), "\n")
	}
	if a, b := withoutDue(dropping.tr.dump()), withoutDue(keeping.tr.dump()); a != b {
		t.Fatalf("states differ:\n%s\nagainst\n%s", a, b)
	}
	if dropping.held*2 > keeping.held {
		t.Fatalf("%d deadlines held, against %d without dropping", dropping.held, keeping.held)
	}
}
