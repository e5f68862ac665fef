package ownerstate

import (
	"bytes"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/driftline/driftline/internal/cputime"
	"github.com/driftline/driftline/internal/memstat"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// deadlines is a test rule: each identity's deadlines are set directly.
type deadlines map[uint32][numTimers]int64

func newTestStore(d deadlines) *Store {
	s := New()
	s.SetDeadline(func(id *Identity, kind uint8) int64 { return d[id.idx][kind] })
	return s
}

func TestGetAndRecordID(t *testing.T) {
	s := New()
	a := s.Get("maas", "n1", true)
	if s.Get("maas", "n1", false) != a || s.Get("maas", "n2", false) != nil || s.Get("maa", "s/n1", false) != nil {
		t.Fatal("lookup")
	}
	s.SetRecord(a, &Record{RecordID: "rec-1", ExpectedState: "allocated", RecordVersion: 1}, 10, "c1")
	if a.Key() != "maas/n1" || a.Provider() != "maas" || a.ProviderID() != "n1" || a.RecordID() != "rec-1" {
		t.Fatalf("identity %q %q %q %q", a.Key(), a.Provider(), a.ProviderID(), a.RecordID())
	}
	if !s.Record(a).LiveExpecting() || s.RecordCorrelation(a) != "c1" {
		t.Fatal("record shape")
	}
	// owner_ref equal to the record id is kept as a flag and survives a
	// change of the record id.
	s.SetObs(a, &Observation{ObservedState: "running", OwnerRef: "rec-1"}, 20, "c2")
	if s.OwnerRef(a) != "rec-1" || s.Obs(a).OwnerRef != 0 {
		t.Fatalf("owner ref %q", s.OwnerRef(a))
	}
	s.SetRecord(a, &Record{RecordID: "rec-2", ExpectedState: "allocated", RecordVersion: 2}, 30, "c3")
	if s.OwnerRef(a) != "rec-1" || a.RecordID() != "rec-2" || s.Get("maas", "n1", false) != a {
		t.Fatalf("owner ref %q after record id change", s.OwnerRef(a))
	}
}

// TestLiveSince: LiveSince is the occurred_at of the version that began
// the record's current live-expecting stretch, through a snapshot too; a
// version that goes on expecting the resource live keeps it, any other
// version and a tombstone set it.
func TestLiveSince(t *testing.T) {
	s := New()
	a := s.Get("app_runtime", "a", true)
	if a.LiveSince != NoTime {
		t.Fatalf("LiveSince %d before any record", a.LiveSince)
	}
	for i, step := range []struct {
		state     string
		deleted   bool
		tombstone bool
		want      int64
	}{
		{state: "running", want: 10},
		{state: "running", want: 10},                // a new version, still running
		{state: "active", want: 10},                 // another live-expecting state
		{state: "stopped", want: 40},                // transitional: the stretch ends
		{state: "stopped", want: 50},                // not live-expecting: its own
		{state: "running", want: 60},                // a new stretch
		{state: "running", deleted: true, want: 70}, // deleted
		{state: "running", want: 80},                // re-created
		{state: "released", want: 90},               // absent-expecting
		{state: "allocated", want: 100},             // live-expecting again
		{tombstone: true, want: 110},                // a tombstone
		{state: "running", want: 120},               // re-created
		{state: "running", want: 120},               // and kept
	} {
		v := int64(i + 1)
		at := v * 10
		if step.tombstone {
			s.SetTombstone(a, at)
		} else {
			s.SetRecord(a, &Record{RecordID: "rec-a", ExpectedState: step.state, Deleted: step.deleted, RecordVersion: v}, at, "")
		}
		if a.LiveSince != step.want {
			t.Fatalf("version %d (%+v): LiveSince %d, want %d", v, step, a.LiveSince, step.want)
		}
	}
	var w snap.Writer
	s.AppendSnapshot(&w)
	r := New()
	if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	b := r.Get("app_runtime", "a", false)
	if b.LiveSince != 120 {
		t.Fatalf("LiveSince %d after a snapshot round trip, want 120", b.LiveSince)
	}
	r.SetRecord(b, &Record{RecordID: "rec-a", ExpectedState: "running", RecordVersion: 14}, 140, "")
	if b.LiveSince != 120 {
		t.Fatalf("LiveSince %d after a restore and a new version, want 120", b.LiveSince)
	}
}

// TestEachProvider: Each visits exactly the identities of one provider,
// in the order they were created, also after a snapshot round trip, and
// every identity for "".
func TestEachProvider(t *testing.T) {
	s := New()
	want := map[string][]string{}
	var all []string
	for i := range 20_000 { // each provider's list over more than one chunk
		// Providers interleave irregularly; one is a prefix of another.
		p := []string{"maas", "maas2", "app_runtime", "gateway"}[(i*7+i/13)%4]
		id := s.Get(p, fmt.Sprint("id-", i), true)
		want[p] = append(want[p], id.Key())
		all = append(all, id.Key())
	}
	check := func(s *Store, when string) {
		t.Helper()
		for _, p := range []string{"maas", "maas2", "app_runtime", "gateway", "storage_provider", "maa"} {
			var got []string
			s.Each(p, func(id *Identity) { got = append(got, id.Key()) })
			if !slices.Equal(got, want[p]) {
				t.Fatalf("%s: Each(%q) visited %d identities, want %d (%.40q)", when, p, len(got), len(want[p]), got)
			}
		}
		var got []string
		s.Each("", func(id *Identity) { got = append(got, id.Key()) })
		if !slices.Equal(got, all) {
			t.Fatalf("%s: Each(\"\") visited %d identities, want %d", when, len(got), len(all))
		}
	}
	check(s, "built")
	var w snap.Writer
	s.AppendSnapshot(&w)
	r := New()
	if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	check(r, "restored")
	id := r.Get("maas", "new", true) // a restored store goes on growing its lists
	want["maas"] = append(want["maas"], id.Key())
	all = append(all, id.Key())
	check(r, "restored, then grown")
}

// TestIndexExactUnderCollisions: with the hash narrowed to 3 bits, every
// key shares its tag (and one of 8 home slots) with many others; lookups
// stay exact through growth, and keys that differ only in where the
// provider ends are apart.
func TestIndexExactUnderCollisions(t *testing.T) {
	for _, mask := range []uint64{0, 7, 0xFFFF_0000_0000_0000, ^uint64(0)} {
		s := New()
		s.index.HashMask = mask
		const n = 3000
		ids := make([]*Identity, n)
		for i := range ids {
			ids[i] = s.Get("p", fmt.Sprint(i), true)
		}
		for i, id := range ids {
			if s.Get("p", fmt.Sprint(i), false) != id || s.Get("p", fmt.Sprint(i), true) != id || id.Key() != fmt.Sprint("p/", i) {
				t.Fatalf("mask %x: key %d", mask, i)
			}
			if s.Get("p", fmt.Sprint(i, "x"), false) != nil || s.Get("p/"+fmt.Sprint(i), "", false) != nil {
				t.Fatalf("mask %x: a key that is not there found", mask)
			}
		}
		a, b := s.Get("maas", "n1", true), s.Get("maa", "s/n1", true)
		if a == b || a.Key() != "maas/n1" || b.Key() != "maa/s/n1" || s.Len() != n+2 {
			t.Fatalf("mask %x: split keys merged", mask)
		}
		if s.index.N != s.Len() || s.index.N*8 > len(s.index.Slots)*7 {
			t.Fatalf("mask %x: %d keys in %d slots", mask, s.index.N, len(s.index.Slots))
		}
	}
}

// TestSnapshotRejectsRepeatedKey: a snapshot that holds one key twice is
// refused, never loaded as two identities or one.
func TestSnapshotRejectsRepeatedKey(t *testing.T) {
	s := New()
	s.Get("p", "a", true)
	s.Get("p", "b", true)
	var w snap.Writer
	s.AppendSnapshot(&w)
	b := bytes.Replace(w.B, []byte("p/b"), []byte("p/a"), 1)
	r := New()
	if err := r.LoadSnapshot(snap.NewReader(b)); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Fatalf("loaded a snapshot with a repeated key: %v", err)
	}
	if r.Len() != 0 {
		t.Fatal("a refused snapshot changed the store")
	}
}

// TestArenaRecordIDs: record ids that change leave the strings read
// before intact, and the arena rewrite (Maintain) keeps every key and
// record id while dropping the garbage.
func TestArenaRecordIDs(t *testing.T) {
	s := New()
	const n = 500
	long := strings.Repeat("r", 1000)
	ids := make([]*Identity, n)
	var held []string // strings read before changes and rewrites
	for i := range ids {
		ids[i] = s.Get("app_runtime", fmt.Sprint("svc-", i), true)
		if i%2 == 0 { // the others get a record only once observed
			s.SetObs(ids[i], &Observation{ObservedState: "running"}, 1, "c")
			held = append(held, ids[i].Key())
		}
	}
	rid := func(i, v int) string { return fmt.Sprint(long[:i%1000], "-", i, "-", v) }
	for v := range 8 {
		for i, id := range ids {
			s.SetRecord(id, &Record{RecordID: rid(i, v), ExpectedState: "running", RecordVersion: int64(v + 1)}, int64(v), "c")
			if i%50 == 0 {
				held = append(held, id.RecordID(), id.Key())
			}
		}
		s.Maintain()
	}
	if g := s.keys.garbage; g > minArenaCompact && g > s.keys.live {
		t.Fatalf("arena not rewritten: %d bytes garbage, %d live", g, s.keys.live)
	}
	for i, id := range ids {
		if id.Key() != fmt.Sprint("app_runtime/svc-", i) || id.RecordID() != rid(i, 7) || id.ProviderID() != fmt.Sprint("svc-", i) ||
			s.Get("app_runtime", fmt.Sprint("svc-", i), false) != id {
			t.Fatalf("identity %d: %q %q", i, id.Key(), id.RecordID())
		}
	}
	// The strings read before still read what they read then.
	k := 0
	for i := range ids {
		if i%2 == 0 {
			if held[k] != fmt.Sprint("app_runtime/svc-", i) {
				t.Fatalf("held key %q", held[k])
			}
			k++
		}
	}
	for v := range 8 {
		for i := 0; i < n; i += 50 {
			if held[k] != rid(i, v) || held[k+1] != fmt.Sprint("app_runtime/svc-", i) {
				t.Fatalf("held %q %q, want record id %d/%d", held[k], held[k+1], i, v)
			}
			k += 2
		}
	}
	// An empty record id, and a key and record id longer than a chunk
	// together.
	s.SetRecord(ids[0], &Record{RecordID: ""}, 9, "c")
	big := s.Get("p", strings.Repeat("k", MaxKeyLen-2), true)
	s.SetRecord(big, &Record{RecordID: strings.Repeat("i", MaxRecordIDLen)}, 9, "c")
	after := s.Get("p", "after", true)
	if ids[0].RecordID() != "" || ids[0].Key() != "app_runtime/svc-0" || len(big.Key()) != MaxKeyLen ||
		big.RecordID() != strings.Repeat("i", MaxRecordIDLen) || after.Key() != "p/after" {
		t.Fatal("empty or long ids")
	}
	// A new identity's first record id grows its entry in place (the
	// length byte after the key is rewritten, for a short and a long id).
	for _, n := range []int{5, 300} {
		id := s.Get("p", fmt.Sprint("inplace-", n), true)
		key, end := id.Key(), len(s.keys.chunks[len(s.keys.chunks)-1])
		s.SetRecord(id, &Record{RecordID: strings.Repeat("x", n)}, 9, "c")
		if id.Key() != key || key != fmt.Sprint("p/inplace-", n) || id.RecordID() != strings.Repeat("x", n) ||
			len(s.keys.chunks[len(s.keys.chunks)-1]) != end+snap.UvarintLen(uint64(n))-1+n {
			t.Fatalf("in place: %q %q", id.Key(), id.RecordID())
		}
		fs := s.Findings(id)
		fs.Make(2).Status = Open
	}
	fs := s.Findings(ids[3])
	fs.Make(1).RetryCount = 7
	s.compactKeys()
	var w snap.Writer
	s.AppendSnapshot(&w)
	r := New()
	if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	for i := range uint32(s.Len()) {
		if a, b := s.At(i), r.At(i); a.Key() != b.Key() || a.RecordID() != b.RecordID() || r.Get(b.Provider(), b.ProviderID(), false) != b ||
			findingsOf(s, a) != findingsOf(r, b) {
			t.Fatalf("identity %d after rewrite and restore: %q %q", i, b.Key(), b.RecordID())
		}
	}
	if f := r.Findings(r.At(3)).Of(1); f == nil || f.RetryCount != 7 || r.Findings(r.At(4)).slots != nil || r.slots.Len() != 3 || r.findings.Len() != 3 {
		t.Fatal("findings after restore")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a key longer than MaxKeyLen was accepted")
			}
		}()
		s.Get("p", strings.Repeat("k", MaxKeyLen), true)
	}()
}

// TestFindingsHeldPerClass checks that the store holds a finding only for
// the classes an identity had one of, and that a snapshot still writes
// eight per identity with any (the format of before), from which a load
// holds only those again, their values intact.
func TestFindingsHeldPerClass(t *testing.T) {
	s := New()
	a, b, c := s.Get("maas", "a", true), s.Get("maas", "b", true), s.Get("maas", "c", true)
	if fs := s.Findings(a); fs.Of(drift.Orphan) != nil || fs.slots != nil {
		t.Fatal("a new identity has findings")
	}
	fa := s.Findings(a)
	f := fa.Make(drift.Stale)
	if *f != noFinding {
		t.Fatalf("a new finding is %+v, want %+v", *f, noFinding)
	}
	f.Status, f.RetryCount, f.Version, f.FirstSeen, f.Correlation = Open, 3, 7, 100, s.Intern("corr-a")
	if g := fa.Make(drift.Stale); g != f {
		t.Fatal("Make of a class the identity has made another finding")
	}
	fb := s.Findings(b)
	fb.Make(drift.Orphan).Status = Resolved
	fb.Make(drift.SupplyChain).Status = Open
	if s.findings.Len() != 3 || s.slots.Len() != 2 {
		t.Fatalf("%d findings in %d identities' slots, want 3 in 2", s.findings.Len(), s.slots.Len())
	}
	if g := s.Findings(a).Of(drift.Stale); g == nil || g.RetryCount != 3 || s.Findings(a).Of(drift.Orphan) != nil {
		t.Fatal("Of after Make")
	}

	var w snap.Writer
	s.AppendSnapshot(&w)
	// Each identity with findings writes eight, each at least 7 bytes
	// (status, retry count, version, three times, correlation).
	var without snap.Writer
	bare := New()
	for _, id := range []*Identity{a, b, c} {
		bare.Get(id.Provider(), id.ProviderID(), true)
	}
	bare.syms.Intern("corr-a")
	bare.AppendSnapshot(&without)
	if grown := len(w.B) - len(without.B); grown < 2*8*7 {
		t.Fatalf("findings took %d bytes of the snapshot, want eight for each of two identities", grown)
	}
	r := New()
	if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	if r.findings.Len() != 3 || r.slots.Len() != 2 {
		t.Fatalf("loaded: %d findings in %d identities' slots, want 3 in 2", r.findings.Len(), r.slots.Len())
	}
	for i, id := range []*Identity{a, b, c} {
		if got, want := findingsOf(r, r.At(uint32(i))), findingsOf(s, id); got != want {
			t.Fatalf("identity %s loaded with findings %s, want %s", id.Key(), got, want)
		}
	}
}

func TestTimersFireInOrderAndMoveLater(t *testing.T) {
	d := deadlines{}
	s := newTestStore(d)
	ids := make([]*Identity, 3)
	for i := range ids {
		ids[i] = s.Get("p", fmt.Sprint(i), true)
	}
	d[0] = [numTimers]int64{100, 50}
	d[1] = [numTimers]int64{70, 0}
	d[2] = [numTimers]int64{300, 0}
	s.Arm(ids[0], TimerMissing, true)
	s.Arm(ids[0], TimerOrphan, true)
	s.Arm(ids[1], TimerMissing, true)
	s.Arm(ids[2], TimerMissing, true)
	// Identity 1's deadline moves later: its entry stays, it moves when
	// due (identity 0's moved earlier: its orphan deadline came before
	// its missing one).
	d[1] = [numTimers]int64{200, 0}
	s.Arm(ids[1], TimerMissing, true)
	if n := s.PendingTimers(); n != 3 || s.queued(ids[1]) != 70 || s.queued(ids[0]) != 50 {
		t.Fatalf("%d heap entries, want 3", n)
	}
	var got []string
	fire := func(id *Identity, kind uint8, at int64) {
		got = append(got, fmt.Sprintf("%s/%d@%d", id.Key(), kind, at))
	}
	s.Fire(150, fire)
	if want := "[p/0/1@50 p/0/0@100]"; fmt.Sprint(got) != want {
		t.Fatalf("fired %v, want %v", got, want)
	}
	got = nil
	s.Fire(250, fire)
	if want := "[p/1/0@200]"; fmt.Sprint(got) != want {
		t.Fatalf("fired %v, want %v", got, want)
	}
	// Disarmed: never fires.
	s.Arm(ids[2], TimerMissing, false)
	got = nil
	s.Fire(1000, fire)
	if len(got) != 0 || s.armed != 0 {
		t.Fatalf("fired %v, %d armed", got, s.armed)
	}
	// A deadline that moves earlier fires at the earlier time.
	d[2] = [numTimers]int64{900, 0}
	s.Arm(ids[2], TimerMissing, true)
	d[2] = [numTimers]int64{400, 0}
	s.Arm(ids[2], TimerMissing, true)
	s.Fire(500, fire)
	if want := "[p/2/0@400]"; fmt.Sprint(got) != want {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

// TestTimerHeapBounded: re-arming earlier and earlier moves the one
// entry of the identity, so the heap holds one entry per identity.
func TestTimerHeapBounded(t *testing.T) {
	d := deadlines{}
	s := newTestStore(d)
	const n = 5000
	for i := range n {
		id := s.Get("p", fmt.Sprint(i), true)
		for step := range 10 {
			d[id.idx] = [numTimers]int64{int64(1000 - step), 0}
			s.Arm(id, TimerMissing, true)
		}
	}
	if p := s.PendingTimers(); p != n {
		t.Fatalf("%d heap entries for %d armed deadlines", p, n)
	}
	fired := 0
	s.Fire(2000, func(id *Identity, kind uint8, at int64) {
		if at != 991 {
			t.Fatalf("fired at %d", at)
		}
		fired++
	})
	if fired != n {
		t.Fatalf("fired %d, want %d", fired, n)
	}
}

// refTimers is the timer heap as it was first written: container/heap,
// an entry pushed whenever a deadline moves earlier, superseded entries
// skipped when they come due. TestTimersAgainstReference holds the
// store's heap to its firing sequence.
type refTimers struct {
	h        refHeap
	queued   []int64
	armed    [][numTimers]bool
	deadline func(i uint32, kind uint8) int64
}

type refHeap []timer

func (h refHeap) Len() int           { return len(h) }
func (h refHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h refHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *refHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

func (r *refTimers) arm(i uint32, kind uint8, on bool) {
	r.armed[i][kind] = on
	if !on {
		return
	}
	if at := r.deadline(i, kind); r.queued[i] == NoTime || at < r.queued[i] {
		r.queued[i] = at
		heap.Push(&r.h, newTimer(at, i))
	}
}

func (r *refTimers) fire(w int64, fn func(i uint32, kind uint8, at int64)) {
	for len(r.h) > 0 && r.h[0].at() <= w {
		t := heap.Pop(&r.h).(timer)
		if r.queued[t.idx] != t.at() {
			continue
		}
		r.queued[t.idx] = NoTime
		for {
			at, kind, ok := int64(math.MaxInt64), uint8(0), false
			for k := range numTimers {
				if d := r.deadline(t.idx, k); r.armed[t.idx][k] && d < at {
					at, kind, ok = d, k, true
				}
			}
			switch {
			case !ok:
			case at > w:
				if r.queued[t.idx] == NoTime || at < r.queued[t.idx] {
					r.queued[t.idx] = at
					heap.Push(&r.h, newTimer(at, t.idx))
				}
			default:
				r.armed[t.idx][kind] = false
				fn(t.idx, kind, at)
				continue
			}
			break
		}
	}
}

// fireBoth fires s and ref up to now, each callback re-arming by rearm
// (the new deadline set in d for s, in dref for ref), and appends what
// each fired to got and want.
func fireBoth(s *Store, ref *refTimers, now int64, d, dref deadlines, rearm func(uint32, uint8, int64) (bool, int64), got, want []string) ([]string, []string) {
	s.Fire(now, func(id *Identity, kind uint8, at int64) {
		got = append(got, fmt.Sprint(id.idx, "/", kind, "@", at))
		if again, next := rearm(id.idx, kind, at); again {
			dl := d[id.idx]
			dl[kind] = next
			d[id.idx] = dl
			s.Arm(id, kind, true)
		}
	})
	ref.fire(now, func(i uint32, kind uint8, at int64) {
		want = append(want, fmt.Sprint(i, "/", kind, "@", at))
		if again, next := rearm(i, kind, at); again {
			dl := dref[i]
			dl[kind] = next
			dref[i] = dl
			ref.arm(i, kind, true)
		}
	})
	return got, want
}

// TestTimersAgainstReference: random arming, disarming, deadlines that
// move either way (some negative, some equal) and fires whose callbacks
// re-arm, applied to the store and to refTimers, fire the same deadlines
// in the same order with the same times.
func TestTimersAgainstReference(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(300)
		d, dref := deadlines{}, deadlines{} // each side's, as its callbacks set them
		s := newTestStore(d)
		ref := &refTimers{queued: make([]int64, n), armed: make([][numTimers]bool, n),
			deadline: func(i uint32, kind uint8) int64 { return dref[i][kind] }}
		ids := make([]*Identity, n)
		for i := range ids {
			ids[i] = s.Get("p", fmt.Sprint(i), true)
			ref.queued[i] = NoTime
		}
		now := int64(0)
		deadline := func() int64 { return now - 50 + rng.Int64N(1000) }
		var got, want []string
		fired := 0
		// The callbacks re-arm by a rule of what fired, so both sides do
		// the same as long as they fire the same.
		rearm := func(i uint32, kind uint8, at int64) (bool, int64) {
			h := uint64(i)*0x9E3779B97F4A7C15 ^ uint64(at)*31 ^ uint64(kind)
			return h%3 == 0, at + 1 + int64(h%200)
		}
		for range 2000 {
			switch op := rng.IntN(10); {
			case op < 6:
				i := uint32(rng.IntN(n))
				kind := uint8(rng.IntN(int(numTimers)))
				on := rng.IntN(5) != 0
				if on {
					dl := d[i]
					dl[kind] = deadline()
					d[i] = dl
					dl = dref[i]
					dl[kind] = d[i][kind]
					dref[i] = dl
				}
				s.Arm(ids[i], kind, on)
				ref.arm(i, kind, on)
			default:
				now += rng.Int64N(300)
				got, want = fireBoth(s, ref, now, d, dref, rearm, got, want)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("seed %d: fired\n%v\nwant\n%v", seed, got, want)
				}
				fired += len(got)
				got, want = got[:0], want[:0]
			}
			if s.armed != countArmed(ref.armed) {
				t.Fatalf("seed %d: %d armed, want %d", seed, s.armed, countArmed(ref.armed))
			}
		}
		if fired < 20 {
			t.Fatalf("seed %d: only %d deadlines fired", seed, fired)
		}
		// A restored store fires the same from here on.
		var w snap.Writer
		s.AppendSnapshot(&w)
		r := newTestStore(d)
		if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
			t.Fatal(err)
		}
		for _, st := range []*Store{s, r} {
			var fired []string
			st.Fire(math.MaxInt64, func(id *Identity, kind uint8, at int64) {
				fired = append(fired, fmt.Sprint(id.idx, "/", kind, "@", at))
			})
			if st == s {
				want = fired
			} else if fmt.Sprint(fired) != fmt.Sprint(want) {
				t.Fatalf("seed %d: restored store fired %v, want %v", seed, fired, want)
			}
		}
	}
}

// TestTimerQueueAgainstReference holds the two-part timer queue to
// refTimers through arming (new entries and entries moved earlier, into
// the heap and into the far part, times tied across identities),
// disarming, fires whose callbacks re-arm, and snapshot round trips
// midway (a restored queue is all far), checking its structure after
// every step (checkTimers), with enough identities that refills move only
// part of the far entries into the heap.
func TestTimerQueueAgainstReference(t *testing.T) {
	var partial, joined, farArms int // fires that left both parts non-empty; far entries that joined the heap; entries queued far
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 11))
		n := 500 + rng.IntN(2500)
		d, dref := deadlines{}, deadlines{}
		s := newTestStore(d)
		ref := &refTimers{queued: make([]int64, n), armed: make([][numTimers]bool, n),
			deadline: func(i uint32, kind uint8) int64 { return dref[i][kind] }}
		for i := range n {
			s.Get("p", fmt.Sprint(i), true)
			ref.queued[i] = NoTime
		}
		now := int64(0)
		var got, want []string
		rearm := func(i uint32, kind uint8, at int64) (bool, int64) {
			h := uint64(i)*0x9E3779B97F4A7C15 ^ uint64(at)*31 ^ uint64(kind)
			return h%4 != 0, at + 1 + int64(h%3000)
		}
		for step := range 4000 {
			switch op := rng.IntN(20); {
			case op < 14:
				i := uint32(rng.IntN(n))
				kind := uint8(rng.IntN(int(numTimers)))
				on := rng.IntN(6) != 0
				id := s.At(i)
				wasFar := id.hpos > uint32(s.near)
				if on {
					// A coarse grid, so that times tie across identities
					// and with the limit.
					at := now - 20 + 10*rng.Int64N(500)
					dl := d[i]
					dl[kind] = at
					d[i] = dl
					dl = dref[i]
					dl[kind] = at
					dref[i] = dl
				}
				s.Arm(id, kind, on)
				ref.arm(i, kind, on)
				switch inHeap := id.hpos != 0 && id.hpos <= uint32(s.near); {
				case wasFar && inHeap:
					joined++
				case !inHeap && id.hpos == uint32(len(s.timers)) && id.hpos > uint32(s.near):
					farArms++
				}
			case op < 19:
				now += rng.Int64N(150)
				got, want = fireBoth(s, ref, now, d, dref, rearm, got, want)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("seed %d step %d: fired\n%v\nwant\n%v", seed, step, got, want)
				}
				got, want = got[:0], want[:0]
				if s.near > 0 && s.near < len(s.timers) {
					partial++
				}
			default:
				var w snap.Writer
				s.AppendSnapshot(&w)
				r := newTestStore(d)
				if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
					t.Fatal(err)
				}
				s = r
			}
			checkTimers(t, s)
			if s.armed != countArmed(ref.armed) {
				t.Fatalf("seed %d step %d: %d armed, want %d", seed, step, s.armed, countArmed(ref.armed))
			}
		}
	}
	if partial == 0 || joined == 0 || farArms == 0 {
		t.Fatalf("%d fires left a partial heap, %d far entries joined the heap, %d entries were queued far: the queue's parts were not exercised", partial, joined, farArms)
	}
}

// TestTimerRefillShare: a refill moves a few percent of the entries into
// the heap (about a thirty-second), not all of them, nor only the first.
func TestTimerRefillShare(t *testing.T) {
	const n = 100_000
	d := deadlines{}
	s := newTestStore(d)
	rng := rand.New(rand.NewPCG(3, 4))
	for i, at := range rng.Perm(n) {
		id := s.Get("p", fmt.Sprint(i), true)
		d[id.idx] = [numTimers]int64{int64(at), 0}
		s.Arm(id, TimerMissing, true)
	}
	s.Fire(-1, func(*Identity, uint8, int64) { t.Fatal("fired") })
	checkTimers(t, s)
	if share := float64(s.near) / n; share < 0.01 || share > 0.1 {
		t.Fatalf("a refill moved %d of %d entries into the heap", s.near, n)
	}
}

// checkTimers checks the structure of s's timer queue: every entry's
// identity knows its position and every identity that claims a position
// has its entry there (so one entry per identity at most), the front is a
// 4-ary heap in (at, idx) order, and while it holds any entry its entries
// are at or before the limit and the far ones after it.
func checkTimers(t *testing.T, s *Store) {
	t.Helper()
	if s.near < 0 || s.near > len(s.timers) {
		t.Fatalf("heap of %d entries in a queue of %d", s.near, len(s.timers))
	}
	for i, e := range s.timers {
		if int(e.idx) >= s.n {
			t.Fatalf("entry %d: identity %d of %d", i, e.idx, s.n)
		}
		if hpos := s.At(e.idx).hpos; hpos != uint32(i+1) {
			t.Fatalf("entry %d: identity %d has hpos %d", i, e.idx, hpos)
		}
		switch {
		case i < s.near && i > 0 && e.less(s.timers[(i-1)/4]):
			t.Fatalf("heap entry %d (%d, %d) before its parent", i, e.at(), e.idx)
		case i < s.near && e.at() > s.lim:
			t.Fatalf("heap entry %d at %d, after the limit %d", i, e.at(), s.lim)
		case i >= s.near && s.near > 0 && e.at() <= s.lim:
			t.Fatalf("far entry %d at %d, not after the limit %d", i, e.at(), s.lim)
		}
	}
	queued := 0
	s.Each("", func(id *Identity) {
		if id.hpos != 0 {
			queued++
		}
	})
	if queued != len(s.timers) {
		t.Fatalf("%d identities claim an entry, %d entries", queued, len(s.timers))
	}
}

func countArmed(a [][numTimers]bool) (n int) {
	for _, k := range a {
		for _, on := range k {
			if on {
				n++
			}
		}
	}
	return n
}

// TestCompaction: values no identity holds any more are dropped once a
// table doubled, and every identity keeps its values.
func TestCompaction(t *testing.T) {
	s := New()
	id := s.Get("app_runtime", "a", true)
	s.SetRecord(id, &Record{RecordID: "r", ExpectedState: "running", Quota: "10", RecordVersion: 1}, 1, "c")
	for i := range 4 * minCompactAt {
		s.SetObs(id, &Observation{ObservedState: "running", Usage: fmt.Sprint(i), OwnerRef: "r"}, int64(i+2), fmt.Sprint("corr-", i))
		s.Maintain()
	}
	if n := s.syms.Len(); n > 2*minCompactAt {
		t.Fatalf("%d interned strings", n)
	}
	last := 4*minCompactAt - 1
	if s.Str(s.Obs(id).Usage) != fmt.Sprint(last) || s.ObsCorrelation(id) != fmt.Sprint("corr-", last) ||
		s.Str(s.Record(id).Quota) != "10" || s.OwnerRef(id) != "r" || !s.Obs(id).Live() || !s.Record(id).LiveExpecting() {
		t.Fatal("values lost in compaction")
	}
}

// TestCompactionSkipsGrowth: tables that double only with the values of
// new identities (each with a record id, version and correlation of its
// own, as when a partition's platform records are first read) are not
// rebuilt: nothing in them is garbage. Replacing values afterwards makes
// the next doubling rebuild them.
func TestCompactionSkipsGrowth(t *testing.T) {
	s := New()
	n := 8 * minCompactAt
	for i := range n {
		id := s.Get("app_runtime", fmt.Sprint("app-", i), true)
		s.SetRecord(id, &Record{RecordID: fmt.Sprint("r-", i), ExpectedState: "running", ExpectedVersion: fmt.Sprint("v", i), RecordVersion: 1},
			int64(i), fmt.Sprint("sync-", i))
		s.Maintain()
	}
	if s.syms.rebuilds != 0 {
		t.Fatalf("%d rebuilds of tables holding no garbage", s.syms.rebuilds)
	}
	for round := 1; s.syms.rebuilds == 0; round++ {
		if round > 4 {
			t.Fatalf("no rebuild after %d rounds replacing every identity's values (%d strings)", round-1, s.syms.Len())
		}
		for i := range n {
			id := s.Get("app_runtime", fmt.Sprint("app-", i), false)
			s.SetObs(id, &Observation{ObservedState: "running", ObservedVersion: fmt.Sprint("v", i, "-", round)}, int64(n+i), fmt.Sprint("scan-", round, "-", i))
			s.Maintain()
		}
	}
	id := s.Get("app_runtime", "app-7", false)
	if s.Str(s.Record(id).ExpectedVersion) != "v7" || s.RecordCorrelation(id) != "sync-7" {
		t.Fatal("values lost in the rebuild")
	}
}

// TestBytesPerIdentity reports the heap a store holds per identity with a
// record, an observation and an armed deadline, by part, and fails above
// the budget of 150 bytes (docs/drift-model.md, memory, gives the
// figures). The index's share varies with its load (it doubles at 7/8),
// so the figure is taken at two sizes.
func TestBytesPerIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 1.2M identities")
	}
	for _, n := range []int{200_000, 1_000_000} {
		per := bytesPerIdentity(t, n)
		if per > 150 {
			t.Errorf("%d identities: %.1f bytes per identity, more than 150", n, per)
		}
	}
}

func bytesPerIdentity(t *testing.T, n int) float64 {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("gpu-eu-west-%06d", i)
	}
	before := memstat.Live()
	s := New()
	s.SetDeadline(func(id *Identity, kind uint8) int64 { return id.ObsAt + 600e9 })
	rec := Record{RecordType: "gpu_allocation", ResourceFamily: "maas", ProductID: "gpu-h100", OwningDomain: "gpuaas",
		OwningPackage: "gpu-scheduler", DomainID: "eu-west", ExpectedState: "allocated", ExpectedVersion: "img-2026.11", RecordVersion: 3}
	obs := Observation{ResourceFamily: "maas", ObservedState: "allocated", ObservedVersion: "img-2026.11"}
	rid := make([]byte, 0, 64)
	for i, k := range keys {
		id := s.Get("maas", k, true)
		rid = append(append(rid[:0], "alloc-"...), k...)
		rec.RecordID = string(rid)
		obs.OwnerRef = rec.RecordID
		s.SetRecord(id, &rec, int64(i), "sync-1")
		s.SetObs(id, &obs, int64(i+1), "scan-1")
		s.Arm(id, TimerMissing, true)
	}
	s.Maintain()
	per := float64(memstat.Live()-before) / float64(n)
	runtime.KeepAlive(s)
	arenaBytes := 0
	for _, c := range s.keys.chunks {
		arenaBytes += cap(c)
	}
	f := func(b uintptr) float64 { return float64(b) / float64(n) }
	structs, keyArena := f(uintptr(len(s.chunks))*unsafe.Sizeof(idChunk{})), f(uintptr(arenaBytes))
	index, timers := f(uintptr(len(s.index.Slots))*8), f(uintptr(cap(s.timers))*unsafe.Sizeof(timer{}))
	t.Logf("%d identities: %.1f bytes per identity (key %d bytes, record id %d bytes): identities %.1f, key arena %.1f, index %.1f (%.0f%% full), timers %.1f, rest %.1f",
		n, per, len("maas/")+len(keys[0]), len("alloc-")+len(keys[0]), structs, keyArena, index,
		100*float64(s.index.N)/float64(len(s.index.Slots)), timers, per-structs-keyArena-index-timers)
	return per
}

// TestLoadSnapshotVersion1: a snapshot written by the previous format
// (testdata/v1.snap: per-identity queue times, superseded heap entries)
// loads into the same state and fires the same deadlines in the same
// order. testdata/v1.want is what the store that wrote it held after
// firing every deadline, and the deadlines it fired. Both were written by
// the version 1 code (commit 754b877) from 300 identities of the three
// providers with records, observations, tombstones, findings, scans and
// armed, disarmed and moved-earlier deadlines (superseded heap entries).
func TestLoadSnapshotVersion1(t *testing.T) {
	blob, err := os.ReadFile("testdata/v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/v1.want")
	if err != nil {
		t.Fatal(err)
	}
	s := New()
	s.SetDeadline(func(id *Identity, kind uint8) int64 {
		if kind == TimerOrphan {
			return id.LiveSince + 100
		}
		return id.ObsAt + 600
	})
	if err := s.LoadSnapshot(snap.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	var fired []string
	s.Fire(1<<62, func(id *Identity, kind uint8, at int64) {
		fired = append(fired, fmt.Sprint(id.idx, "/", kind, "@", at))
	})
	got := dumpStore(s) + strings.Join(fired, " ") + "\n"
	if got != string(want) {
		t.Fatalf("version 1 snapshot loaded as\n%s\nwant\n%s", got, want)
	}
	// A version this build does not know is refused.
	bad := bytes.Clone(blob)
	bad[len("ownerstate")+1] = snapshotVersion + 1
	if err := New().LoadSnapshot(snap.NewReader(bad)); err == nil {
		t.Fatal("a snapshot of a later version loaded")
	}
}

// dumpStore prints a store's identities and scans (as testdata/v1.want).
func dumpStore(s *Store) string {
	var b strings.Builder
	s.Each("", func(id *Identity) {
		fmt.Fprintf(&b, "%s|%s|%s|%s|%s|%d|%d|%d|%d|%v|%v|%v|%v|%d", id.Key(), id.RecordID(), s.OwnerRef(id), s.RecordCorrelation(id), s.ObsCorrelation(id),
			id.RecordVersion, id.LiveSince, id.ObsAt, id.OrphanSince, id.Deleted(), id.Armed(TimerMissing), id.Armed(TimerOrphan), id.NodeMismatch(), id.Disagreements())
		if r := s.Record(id); r != nil {
			fmt.Fprintf(&b, "|rec %s %s %s", s.Str(r.ExpectedState), s.Str(r.Quota), s.Str(r.ProductID))
		}
		if o := s.Obs(id); o != nil {
			fmt.Fprintf(&b, "|obs %s %s %s", s.Str(o.ObservedState), s.Str(o.Usage), s.Str(o.OwnerRef))
		}
		// As the store held findings when the want files were written:
		// eight per identity with any (six in version 1).
		if fs := s.Findings(id); fs.slots != nil {
			for k := range drift.Class(drift.NumClasses) {
				f := fs.Of(k)
				if f == nil {
					f = &noFinding
				}
				if k >= findingsBefore3 && *f == noFinding {
					continue // the fleet core's classes, which version 1 has not
				}
				fmt.Fprintf(&b, "|f%d %d %d %d %d %s", k, f.Status, f.Version, f.FirstSeen, f.RetryCount, s.Str(f.Correlation))
			}
		}
		b.WriteString("\n")
	})
	for _, p := range []string{"maas", "app_runtime", "gateway"} {
		at, ok := s.LastScan(p)
		fmt.Fprintf(&b, "scan %s %d %v\n", p, at, ok)
	}
	return b.String()
}

// BenchmarkSetNew applies a first record and a first observation to new
// identities whose versions and routes are their own, as a fleet's
// platform records first bring them: every value interned and every
// shape created is new, in tables of a million.
func BenchmarkSetNew(b *testing.B) {
	s := New()
	buf := make([]byte, 0, 64)
	num := func(prefix string, i int) string {
		return string(strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10))
	}
	b.ReportAllocs()
	for i := range b.N {
		id := s.Get("gpuaas", num("gpu-", i), true)
		s.SetRecord(id, &Record{RecordType: "allocation", RecordID: num("alloc-", i), ResourceFamily: "gpu", ProductID: "h100",
			OwningDomain: "eu-west", OwningPackage: "compute", DomainID: "d-1", ExpectedState: "allocated",
			ExpectedVersion: num("v", i), Quota: "8", RouteTarget: num("route-", i), RecordVersion: 1}, int64(i), "sync")
		s.SetObs(id, &Observation{ResourceFamily: "gpu", ObservedState: "running", ObservedVersion: num("v", i),
			Usage: "8", RouteTarget: num("route-", i)}, int64(i), "scan-1")
	}
}

// BenchmarkTimers fires the deadlines of a million identities spread over
// a period, each re-armed a period later as it fires (a staleness
// deadline that every scan moves on): a pop and a push per op, in a queue
// of a million entries whose identities are spread over memory.
// cpu-ns/op is the process's CPU time per op, a fairer figure than ns/op
// on a shared machine.
//
//	go test -run '^$' -bench '^BenchmarkTimers$' ./pipeline/ownerstate
func BenchmarkTimers(b *testing.B) {
	const n, period = 1_000_000, int64(1_000_000)
	due := make([]int64, n) // by identity index: the rule's one deadline
	s := New()
	s.SetDeadline(func(id *Identity, kind uint8) int64 { return due[id.idx] })
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]*Identity, n)
	for i := range ids {
		ids[i] = s.Get("p", strconv.Itoa(i), true)
	}
	for _, i := range rng.Perm(n) { // armed in random order, as scans bring them
		due[ids[i].idx] = rng.Int64N(period)
		s.Arm(ids[i], TimerMissing, true)
	}
	fired := 0
	rearm := func(id *Identity, kind uint8, at int64) {
		due[id.idx] = at + period
		s.Arm(id, TimerMissing, true)
		fired++
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Now()
	for w := int64(0); fired < b.N; {
		w += period / 1000
		s.Fire(w, rearm)
	}
	b.ReportMetric(float64(cputime.Now()-cpu)/float64(fired), "cpu-ns/op")
}

// TestPrefetch checks that Prefetch hashes a record's key as Get does, so
// that PrefetchIdentity reads the slot Get will, and that neither changes
// the store, for keys known and unknown.
func TestPrefetch(t *testing.T) {
	s := New()
	want := s.Get("maas", "node-1", true)
	for _, key := range []string{"maas/node-1", "maas/node-2", "", "no-slash"} {
		h := s.Prefetch([]byte(key))
		provider, id, _ := strings.Cut(key, "/")
		if key != "no-slash" && key != "" && h != s.index.HashKey(provider, id) {
			t.Fatalf("%q: Prefetch hashes to %x, Get to %x", key, h, s.index.HashKey(provider, id))
		}
		s.PrefetchIdentity(h)
		s.PrefetchState(h)
	}
	if s.Len() != 1 || s.Get("maas", "node-1", false) != want || s.Get("maas", "node-2", false) != nil {
		t.Fatalf("prefetching changed the store: %d identities", s.Len())
	}
}

// findingsOf prints id's findings, class by class.
func findingsOf(s *Store, id *Identity) string {
	var b strings.Builder
	fs := s.Findings(id)
	for k := range drift.Class(drift.NumClasses) {
		if f := fs.Of(k); f != nil {
			fmt.Fprintf(&b, "%d:%+v ", k, *f)
		}
	}
	return b.String()
}
