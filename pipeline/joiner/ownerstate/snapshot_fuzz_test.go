package ownerstate

import (
	"fmt"
	"slices"
	"testing"

	"github.com/driftline/driftline/pipeline/stream/snap"
)

// fuzzDeadline is the deadline rule of the fuzz stores.
func fuzzDeadline(id *Identity, kind uint8) int64 {
	if kind == TimerOrphan {
		return id.LiveSince + 100
	}
	return id.ObsAt + 600
}

// FuzzLoadSnapshot checks that no input makes LoadSnapshot, or the store
// it restores, panic; that a refused snapshot leaves the store empty; and
// that whatever loads snapshots back to the same identities, firing the
// same deadlines in the same order.
func FuzzLoadSnapshot(f *testing.F) {
	s := New()
	s.SetDeadline(fuzzDeadline)
	for i := range 40 {
		p := []string{"maas", "app_runtime", "gateway"}[i%3]
		id := s.Get(p, fmt.Sprint("r-", i%17), true)
		if i%2 == 0 {
			s.SetRecord(id, &Record{RecordID: fmt.Sprint("rec-", i), ExpectedState: "running", Quota: "q", RecordVersion: int64(i)}, int64(10*i), "c1")
			s.Arm(id, TimerOrphan, true)
		}
		if i%3 != 2 {
			s.SetObs(id, &Observation{ObservedState: "running", OwnerRef: "o", Usage: fmt.Sprint(i % 4)}, int64(10*i+5), "c2")
			s.Arm(id, TimerMissing, i%5 != 0)
		}
		if i%7 == 0 {
			fs := s.Findings(id)
			fs.Make(1).Status = Open
			s.SetTombstone(id, int64(10*i+7))
		}
	}
	s.CompleteScan("maas", 123)
	var w snap.Writer
	s.AppendSnapshot(&w)
	f.Add(w.B)
	w = snap.Writer{}
	New().AppendSnapshot(&w)
	f.Add(w.B)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New()
		r.SetDeadline(fuzzDeadline)
		if err := r.LoadSnapshot(snap.NewReader(b)); err != nil {
			if r.Len() != 0 {
				t.Fatalf("a refused snapshot left %d identities", r.Len())
			}
			return
		}
		var w snap.Writer
		r.AppendSnapshot(&w)
		again := New()
		again.SetDeadline(fuzzDeadline)
		if err := again.LoadSnapshot(snap.NewReader(w.B)); err != nil {
			t.Fatalf("a loaded store's snapshot does not load: %v", err)
		}
		if a, b := dumpStore(again), dumpStore(r); a != b {
			t.Fatalf("reloaded\n%s\nloaded\n%s", a, b)
		}
		fire := func(s *Store) []string {
			var fired []string
			s.Fire(1<<62, func(id *Identity, kind uint8, at int64) {
				fired = append(fired, fmt.Sprint(id.idx, "/", kind, "@", at))
			})
			return fired
		}
		if a, b := fire(again), fire(r); !slices.Equal(a, b) {
			t.Fatalf("reloaded store fired %v, loaded store %v", a, b)
		}
		id := r.Get("maas", "new", true)
		r.SetRecord(id, &Record{RecordID: "x"}, 1, "c")
		r.SetObs(id, &Observation{ObservedState: "running"}, 2, "c")
		r.Arm(id, TimerMissing, true)
		r.Maintain()
	})
}
