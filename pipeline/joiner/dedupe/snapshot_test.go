package dedupe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/stream/snap"
)

// snapshot returns s's section, and panics when it is longer than
// SnapshotSize promised: every test that snapshots checks the bound.
func snapshot(s *Set) []byte {
	var w snap.Writer
	bound := s.SnapshotSize()
	s.AppendSnapshot(&w)
	if len(w.B) > bound {
		panic(fmt.Sprintf("snapshot of %d bytes, SnapshotSize %d", len(w.B), bound))
	}
	return w.B
}

func load(t *testing.T, opts Options, b []byte) *Set {
	t.Helper()
	s := New(opts)
	r := snap.NewReader(b)
	if err := s.LoadSnapshot(r); err != nil {
		t.Fatalf("load: %v", err)
	}
	if r.Len() != 0 {
		t.Fatalf("%d bytes left after the section", r.Len())
	}
	return s
}

// TestSnapshotRestoresExactly runs a workload on a set, snapshots it at
// several points, and checks that the restored set answers the rest of
// the workload exactly as the original.
func TestSnapshotRestoresExactly(t *testing.T) {
	opts := Options{Horizon: 2 * time.Hour, Bucket: 20 * time.Minute}
	for seed := range uint64(3) {
		ops := randomOps(seed, 12000)
		for _, cut := range []int{0, 3000, 9000} {
			a := New(opts)
			run := func(s *Set, ops []op, check *Set) {
				for i, o := range ops {
					if o.advance {
						s.Advance(o.at)
						if check != nil {
							check.Advance(o.at)
						}
						continue
					}
					got := s.Observe(o.producer, o.hasSeq, o.seq, o.id, o.at, o.digest)
					if check != nil {
						if want := check.Observe(o.producer, o.hasSeq, o.seq, o.id, o.at, o.digest); got != want {
							t.Fatalf("seed %d cut %d op %d %+v: restored %v, original %v", seed, cut, i, o, got, want)
						}
						if got == Conflict && s.FirstDigest() != check.FirstDigest() {
							t.Fatalf("seed %d cut %d op %d %+v: restored names digest %x, original %x", seed, cut, i, o, s.FirstDigest(), check.FirstDigest())
						}
					}
				}
			}
			run(a, ops[:cut], nil)
			b1 := snapshot(a)
			b := load(t, opts, b1)
			if b2 := snapshot(b); !bytes.Equal(b1, b2) {
				t.Fatalf("seed %d cut %d: snapshot of the restored set differs (%d vs %d bytes)", seed, cut, len(b2), len(b1))
			}
			if b.Len() != a.Len() || b.Producers() != a.Producers() || !b.Watermark().Equal(a.Watermark()) || !b.LateBefore().Equal(a.LateBefore()) {
				t.Fatalf("seed %d cut %d: restored len %d producers %d, original %d %d", seed, cut, b.Len(), b.Producers(), a.Len(), a.Producers())
			}
			run(b, ops[cut:], a)
		}
	}
}

func TestSnapshotCollisions(t *testing.T) {
	s := New(DefaultOptions())
	s.Observe("p", false, 0, "a", t0, 1)
	// Put a second identity in the overflow map, as a hash collision does.
	bk := s.ids.bucket(floorDiv(t0.UnixNano(), s.width))
	if added, _ := s.ids.addHash(bk, hashID(s.names["p"], "a"), s.names["p"], "b", 1); !added || len(bk.collide) != 1 {
		t.Fatal("no collision")
	}
	r := load(t, DefaultOptions(), snapshot(s))
	for _, id := range []string{"a", "b"} {
		if got := r.Observe("p", false, 0, id, t0, 1); got != Duplicate {
			t.Fatalf("%s: %v after restore", id, got)
		}
	}
	if got := r.Observe("p", false, 0, "c", t0, 1); got != Fresh {
		t.Fatalf("c: %v", got)
	}
	r.Advance(at(100 * time.Hour))
	if r.Len() != 0 || len(r.ids.buckets) != 0 {
		t.Fatalf("%d identities past the horizon", r.Len())
	}
}

func TestSnapshotKeepsLateBefore(t *testing.T) {
	s := New(Options{Horizon: time.Hour, Bucket: time.Hour})
	s.Observe("p", true, 1, "", t0, 1)
	s.Advance(at(3 * time.Hour))
	// Restarted with a longer horizon: what was forgotten stays late.
	r := load(t, Options{Horizon: 5 * time.Hour, Bucket: time.Hour}, snapshot(s))
	if got := r.Observe("p", true, 1, "", t0, 1); got != Late {
		t.Fatalf("%v, want late", got)
	}
	r.Advance(at(4 * time.Hour))
	if !r.LateBefore().Equal(at(2 * time.Hour)) {
		t.Fatalf("late before %v", r.LateBefore())
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	s := New(DefaultOptions())
	for i := range 300 {
		s.Observe("scanner", true, uint64(i*3), "", at(time.Duration(i)*time.Minute), 1)
		s.Observe("gw", false, 0, string(rune('a'+i%26))+"-id", at(time.Duration(i)*time.Minute), 1)
		s.Observe("big", true, 1<<40+uint64(i), "", at(time.Duration(i)*time.Minute), 1)
	}
	s.Advance(at(30 * time.Hour))
	b := snapshot(s)
	for n := range len(b) {
		r := snap.NewReader(b[:n])
		if err := New(DefaultOptions()).LoadSnapshot(r); err == nil {
			t.Fatalf("prefix %d of %d loaded", n, len(b))
		}
	}
	// Flipped bytes: an error or a consistent set, never a panic.
	for i := range len(b) {
		c := bytes.Clone(b)
		c[i] ^= 0x5a
		r := New(DefaultOptions())
		if err := r.LoadSnapshot(snap.NewReader(c)); err != nil {
			if r.Len() != 0 {
				t.Fatalf("byte %d: failed load left %d identities", i, r.Len())
			}
			continue
		}
		r.Observe("scanner", true, 5, "", at(29*time.Hour), 1)
	}
	r := snap.NewReader([]byte("\x06dedupe\x04"))
	if err := New(DefaultOptions()).LoadSnapshot(r); err == nil || errors.Is(err, snap.ErrShort) {
		t.Fatalf("version mismatch: %v", err)
	}
}

// FuzzLoadSnapshot checks that no input makes LoadSnapshot panic, and that
// whatever loads snapshots back to what it loaded from.
func FuzzLoadSnapshot(f *testing.F) {
	s := New(DefaultOptions())
	for i := range 50 {
		s.Observe("scanner", true, uint64(i*7), "", at(time.Duration(i)*time.Minute), 1)
		s.Observe("gw", false, 0, string(rune('a'+i%26)), at(time.Duration(i)*time.Minute), 1)
		s.Observe("big", true, 1<<40+uint64(i), "", at(time.Duration(i)*time.Minute), 1)
	}
	s.Advance(at(25 * time.Hour))
	f.Add(snapshot(s))
	f.Add(snapshot(New(DefaultOptions())))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New(DefaultOptions())
		if r.LoadSnapshot(snap.NewReader(b)) != nil {
			return
		}
		again := load(t, DefaultOptions(), snapshot(r))
		if again.Len() != r.Len() || again.Producers() != r.Producers() {
			t.Fatalf("reloaded %d/%d, loaded %d/%d", again.Len(), again.Producers(), r.Len(), r.Producers())
		}
		r.Observe("scanner", true, 3, "", at(24*time.Hour), 1)
		r.Observe("gw", false, 0, "a", at(24*time.Hour), 1)
	})
}

// TestSnapshotVersion1 loads a section of the previous format (seqs in
// bitmaps only), written by the release before runs of seqs: a joiner
// upgraded in place restores from its checkpoints instead of replaying.
func TestSnapshotVersion1(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	s := load(t, DefaultOptions(), b)
	if s.Len() != 618 || s.Producers() != 4 {
		t.Fatalf("%d identities of %d producers, want 618 of 4", s.Len(), s.Producers())
	}
	for _, c := range []struct {
		producer string
		seq      uint64
		want     Result
	}{
		{"agent", 120, Duplicate}, {"agent", 299, Duplicate}, {"agent", 300, Fresh},
		{"scanner", 3 * 150, Duplicate}, {"scanner", 3*150 + 1, Fresh},
		{"big", 1<<40 + 200, Duplicate}, {"big", 1<<40 + 300, Fresh},
	} {
		if got := s.Observe(c.producer, true, c.seq, "", at(5*time.Hour), 1); got != c.want {
			t.Errorf("%s seq %d: %v, want %v", c.producer, c.seq, got, c.want)
		}
	}
	if got := s.Observe("gw", false, 0, "k-id", at(270*time.Minute), 1); got != Duplicate {
		t.Errorf("a known event id: %v", got)
	}
}
