package ownerstate

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/driftline/driftline/pipeline/snap"
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

func TestCollidingHashes(t *testing.T) {
	s := New()
	a := s.Get("p", "a", true)
	// Force a collision: file b under a's hash as if xxhash collided.
	b := s.add("p/b")
	s.collided["p/b"] = b.idx
	s.index[hashKey("p", "b")] = a.idx
	if s.Get("p", "b", false) != b || s.Get("p", "a", false) != a {
		t.Fatal("a hash collision merged two identities")
	}
}

// TestSnapshotKeepsCollisions: a snapshot of a store whose keys collide
// restores both identities apart. The collision is simulated by loading
// two identities with the same key into the snapshot's reader (the same
// hash), which the loader must file as a collision, not merge.
func TestSnapshotKeepsCollisions(t *testing.T) {
	s := New()
	s.Get("p", "a", true)
	s.Get("p", "b", true)
	var w snap.Writer
	s.AppendSnapshot(&w)
	// Rewrite "p/b" as "p/a": two identities, one hash.
	b := bytes.Replace(w.B, []byte("p/b"), []byte("p/a"), 1)
	r := New()
	if err := r.LoadSnapshot(snap.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 || r.Get("p", "a", false) != r.At(0) || r.collided["p/a"] != 1 {
		t.Fatalf("%d identities, collided %v", r.Len(), r.collided)
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
	// Identity 1's deadline moves later: no new entry, it moves when due
	// (identity 0 has two: its orphan deadline came before its missing one).
	d[1] = [numTimers]int64{200, 0}
	s.Arm(ids[1], TimerMissing, true)
	if n := s.PendingTimers(); n != 4 {
		t.Fatalf("%d heap entries, want 4", n)
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

// TestTimerHeapBounded: re-arming earlier and earlier leaves superseded
// entries that a sweep drops, so the heap stays within twice the armed
// deadlines.
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
	if p := s.PendingTimers(); p > 2*n+minTimerSweep {
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

// TestBytesPerIdentity reports the heap a store holds per identity with a
// record, an observation and an armed deadline, and fails if it exceeds
// a regression guard (the figure is in docs/drift-model.md, memory).
func TestBytesPerIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 200k identities")
	}
	const n = 200000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("gpu-eu-west-%06d", i)
	}
	measure := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := measure()
	s := New()
	s.SetDeadline(func(id *Identity, kind uint8) int64 { return id.ObsAt + 600e9 })
	rec := Record{RecordType: "gpu_allocation", ResourceFamily: "maas", ProductID: "gpu-h100", OwningDomain: "gpuaas",
		OwningPackage: "gpu-scheduler", DomainID: "eu-west", ExpectedState: "allocated", ExpectedVersion: "img-2026.11", RecordVersion: 3}
	obs := Observation{ResourceFamily: "maas", ObservedState: "allocated", ObservedVersion: "img-2026.11"}
	for i, k := range keys {
		id := s.Get("maas", k, true)
		rec.RecordID = "alloc-" + k
		obs.OwnerRef = rec.RecordID
		s.SetRecord(id, &rec, int64(i), "sync-1")
		s.SetObs(id, &obs, int64(i+1), "scan-1")
		s.Arm(id, TimerMissing, true)
	}
	s.Maintain()
	per := float64(measure()-before) / n
	runtime.KeepAlive(s)
	t.Logf("%.0f bytes per identity (key %d bytes, record id %d bytes)", per, len("maas/")+len(keys[0]), len("alloc-")+len(keys[0]))
	if per > 200 {
		t.Fatalf("%.0f bytes per identity, more than the 200 guarded", per)
	}
}
