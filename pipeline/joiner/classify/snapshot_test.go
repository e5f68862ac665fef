package classify

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/ownerstate"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// randomStream applies n random events of a small fleet to the engines:
// records (new versions, deletions, tombstones), observations that agree
// or not, scans, node verdicts, late events, in event time with jitter.
func randomStream(seed uint64, n int, engines ...*Engine) {
	rng := rand.New(rand.NewPCG(seed, 1))
	at := t0
	states := []string{"running", "allocated", "released", "stopped", "deleted"}
	versions := []string{"v1", "v2", ""}
	for i := range n {
		at = at.Add(time.Duration(rng.IntN(20)) * time.Second)
		ev := at.Add(-time.Duration(rng.IntN(40)) * time.Second) // late by up to 40 s
		id := fmt.Sprint("i", rng.IntN(60))
		corr := fmt.Sprint("c", i%17)
		for _, e := range engines {
			switch k := rng.IntN(100); {
			case k < 25:
				e.ApplyRecord(&contract.PlatformRecord{RecordType: "app_instance", RecordID: "rec-" + id, RecordVersion: int64(i),
					Provider: contract.ProviderAppRuntime, ProviderID: id, ResourceFamily: contract.FamilyAppRuntime,
					ExpectedState: states[rng.IntN(len(states))], ExpectedVersion: versions[rng.IntN(len(versions))],
					Deleted: rng.IntN(20) == 0, Quota: []string{"", "10", "2.5"}[rng.IntN(3)],
					RouteTarget: []string{"", "app-a", "app-b"}[rng.IntN(3)], OwningDomain: "eu"}, ev, corr)
			case k < 28:
				e.ApplyTombstone(contract.ProviderAppRuntime, id, ev)
			case k < 90:
				e.ApplyObservation(&contract.Observation{Provider: contract.ProviderAppRuntime, ProviderID: id,
					ResourceFamily: contract.FamilyAppRuntime, ObservedState: states[rng.IntN(3)], ObservedVersion: versions[rng.IntN(2)],
					OwnerRef: []string{"", "rec-" + id, "rec-x"}[rng.IntN(3)], Usage: []string{"", "3", "12.75"}[rng.IntN(3)],
					RouteTarget: []string{"", "app-a", "app-b"}[rng.IntN(3)]}, ev, corr)
			case k < 95:
				e.ApplyScan(&contract.ScanCompleted{Provider: contract.ProviderAppRuntime, ScanID: corr, ScanStartedAt: ev.Add(-time.Minute)}, ev, corr)
			default:
				e.SetNodeIdentity(id, rng.IntN(2) == 0, ev, corr, rng.IntN(2) == 0)
				e.Advance(ev)
			}
		}
	}
}

// TestSnapshotRestoresExactly: an engine restored from a snapshot taken
// mid-stream emits exactly the transitions the original emits for the
// rest of the stream.
func TestSnapshotRestoresExactly(t *testing.T) {
	for seed := range uint64(5) {
		snapshot := checkRestore(t, seed, randomStream, 3000, 3000)
		// A truncated snapshot is an error, not a panic.
		eb := New(DefaultOptions(), ownerstate.New(), func(*drift.Finding, *uint32) {})
		if err := eb.LoadSnapshot(snap.NewReader(snapshot[:len(snapshot)/2])); err == nil {
			t.Fatal("truncated snapshot loaded")
		}
	}
}

// checkRestore feeds an engine before events of stream (seed), restores a
// second engine from its snapshot, feeds both after events of another
// stream and fails unless they emit the same transitions, some. It
// returns the snapshot.
func checkRestore(t *testing.T, seed uint64, stream func(uint64, int, ...*Engine), before, after int) []byte {
	t.Helper()
	var a, b []string
	record := func(out *[]string) Emit {
		return func(f *drift.Finding, _ *uint32) { *out = append(*out, fmt.Sprintf("%+v", *f)) }
	}
	ea := New(DefaultOptions(), ownerstate.New(), record(&a))
	stream(seed, before, ea)
	var w snap.Writer
	ea.AppendSnapshot(&w)
	eb := New(DefaultOptions(), ownerstate.New(), record(&b))
	if err := eb.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	a = nil
	stream(seed+100, after, ea)
	stream(seed+100, after, eb)
	if len(a) == 0 {
		t.Fatal("no transitions after the snapshot")
	}
	if len(a) != len(b) {
		t.Fatalf("seed %d: %d transitions after restore, want %d", seed, len(b), len(a))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed %d: transition %d differs:\n got %s\nwant %s", seed, i, b[i], a[i])
		}
	}
	return w.B
}

// compactingStream is randomStream with two providers, ids with slashes and
// unicode, unique correlation ids and versions (so the intern tables
// compact), fleet verdicts and bounds.
func compactingStream(seed uint64, n int, engines ...*Engine) {
	rng := rand.New(rand.NewPCG(seed, 7))
	at := t0.Add(time.Duration(seed) * time.Hour)
	states := []string{"running", "allocated", "released", "stopped", "deleted"}
	provs := []string{contract.ProviderAppRuntime, contract.ProviderMAAS}
	for i := range n {
		at = at.Add(time.Duration(rng.IntN(20)) * time.Second)
		ev := at.Add(-time.Duration(rng.IntN(40)) * time.Second)
		p := provs[rng.IntN(2)]
		id := fmt.Sprintf("i/%d/ü", rng.IntN(80))
		corr := fmt.Sprint("c", seed, "-", i)
		ver := []string{"v1", "v2", "", fmt.Sprint("u", i)}[rng.IntN(4)]
		k := rng.IntN(100)
		bound := rng.IntN(10) == 0
		for _, e := range engines {
			if bound {
				e.SetBound(ev.Add(-time.Duration(rng.IntN(30)) * time.Second))
			} else {
				e.SetBound(time.Time{})
			}
			switch {
			case k < 25:
				e.ApplyRecord(&contract.PlatformRecord{RecordType: "x", RecordID: fmt.Sprint("rec-", id, "-", rng.IntN(2)), RecordVersion: int64(i),
					Provider: p, ProviderID: id, ResourceFamily: contract.FamilyAppRuntime,
					ExpectedState: states[rng.IntN(len(states))], ExpectedVersion: ver,
					Deleted: rng.IntN(20) == 0, Quota: []string{"", "10", "2.5"}[rng.IntN(3)], Tags: []string{"a", fmt.Sprint("t", i%50)},
					RouteTarget: []string{"", "app-a", "app-b"}[rng.IntN(3)], OwningDomain: "eu"}, ev, corr)
			case k < 28:
				e.ApplyTombstone(p, id, ev)
			case k < 88:
				e.ApplyObservation(&contract.Observation{Provider: p, ProviderID: id,
					ResourceFamily: contract.FamilyAppRuntime, ObservedState: states[rng.IntN(3)], ObservedVersion: ver,
					OwnerRef: []string{"", "rec-" + id + "-0", "rec-x"}[rng.IntN(3)], Usage: []string{"", "3", "12.75"}[rng.IntN(3)],
					RouteTarget: []string{"", "app-a", "app-b"}[rng.IntN(3)]}, ev, corr)
			case k < 93:
				e.ApplyScan(&contract.ScanCompleted{Provider: p, ScanID: corr, ScanStartedAt: ev.Add(-time.Minute)}, ev, corr)
			case k < 96:
				e.SetNodeFleet(id, rng.IntN(2) == 0, rng.IntN(3) == 0, ev, corr, rng.IntN(2) == 0)
				e.Advance(ev)
			default:
				e.SetNodeIdentity(id, rng.IntN(2) == 0, ev, corr, rng.IntN(2) == 0)
				e.Advance(ev)
			}
		}
	}
}

// TestSnapshotRestoresExactlyCompacting: as TestSnapshotRestoresExactly,
// over a stream whose interned tables compact before and after the
// snapshot, with node verdicts and watermark bounds.
func TestSnapshotRestoresExactlyCompacting(t *testing.T) {
	for seed := range uint64(3) {
		checkRestore(t, seed, compactingStream, 20000, 30000)
	}
}
