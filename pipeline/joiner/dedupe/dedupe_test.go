package dedupe

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestObserve(t *testing.T) {
	s := New(DefaultOptions())
	steps := []struct {
		producer string
		hasSeq   bool
		seq      uint64
		id       string
		want     Result
	}{
		{"p1", true, 1, "a", Fresh},
		{"p1", true, 1, "b", Duplicate}, // same (producer, seq): a redelivery, whatever the id
		{"p2", true, 1, "a", Fresh},     // another producer's seq 1 is another event
		{"p1", false, 0, "a", Fresh},
		{"p1", false, 0, "a", Duplicate},
		{"p2", false, 0, "a", Fresh},
		{"p1", true, 1 << 40, "c", Fresh},
		{"p1", true, 1 << 40, "c", Duplicate},
		{"p1", true, 1<<32 - 1, "d", Fresh},
		{"p1\x00", false, 0, "a", Fresh}, // no ambiguity between producer and id bytes
		{"p1", false, 0, "\x00a", Fresh},
	}
	for i, st := range steps {
		if got := s.Observe(st.producer, st.hasSeq, st.seq, st.id, t0, 1); got != st.want {
			t.Fatalf("step %d: Observe = %v, want %v", i, got, st.want)
		}
	}
	if s.Len() != 8 {
		t.Fatalf("Len = %d, want 8", s.Len())
	}
}

func TestHorizon(t *testing.T) {
	s := New(Options{Horizon: 2 * time.Hour, Bucket: time.Hour})
	obs := func(seq uint64, id string, d time.Duration, want Result) {
		t.Helper()
		if got := s.Observe("p", id == "", seq, id, at(d), 1); got != want {
			t.Fatalf("seq %d id %q at %v: %v, want %v", seq, id, d, got, want)
		}
	}
	s.Advance(time.Time{}) // no watermark yet
	obs(10, "", 0, Fresh)
	obs(0, "a", 0, Fresh)
	obs(11, "", 90*time.Minute, Fresh)
	obs(0, "b", 90*time.Minute, Fresh)
	s.Advance(at(2*time.Hour + time.Minute)) // late before 0:01
	obs(10, "", 0, Late)                     // a redelivery past the horizon is late, not a duplicate
	obs(0, "a", 0, Late)
	obs(12, "", 0, Late)
	obs(13, "", time.Minute, Fresh) // exactly at the horizon: still checked
	obs(13, "", time.Minute, Duplicate)
	obs(11, "", 90*time.Minute, Duplicate)
	obs(0, "b", 90*time.Minute, Duplicate)
	if s.Len() != 5 {
		t.Fatalf("Len = %d before release, want 5 (bucket 0 is not entirely late yet)", s.Len())
	}
	s.Advance(at(3 * time.Hour)) // bucket [0,1h) released
	// Seq 10 and id a go; seq 13 (sent after seq 11, with an older
	// occurred_at) stays above the low-water mark, 11, until the second
	// hour is released too.
	if s.Len() != 3 {
		t.Fatalf("Len = %d after releasing the first hour, want 3", s.Len())
	}
	obs(13, "", time.Minute, Late)
	obs(11, "", 90*time.Minute, Duplicate)
	obs(0, "b", 90*time.Minute, Duplicate)
	// An out-of-order seq within the horizon below the released ones is
	// still checked exactly.
	obs(5, "", 70*time.Minute, Fresh)
	obs(5, "", 70*time.Minute, Duplicate)
	s.Advance(at(3 * time.Hour)) // not later: nothing changes
	s.Advance(at(10 * time.Hour))
	if s.Len() != 0 || s.Producers() != 0 {
		t.Fatalf("Len %d, producers %d after the horizon passed everything", s.Len(), s.Producers())
	}
	obs(20, "", 9*time.Hour, Fresh)
	obs(0, "c", 9*time.Hour, Fresh)
	obs(20, "", 9*time.Hour, Duplicate)
	obs(0, "c", 9*time.Hour, Duplicate)
}

// TestCollisions forces ids onto one hash and checks that distinct
// identities are never merged.
func TestCollisions(t *testing.T) {
	s := New(Options{Horizon: time.Hour, Bucket: time.Hour})
	st := &s.ids
	// Each identity's digest is its own, so a repeat must find the digest
	// of its own entry, not of the one its hash collides with.
	digest := func(prod uint32, id string) uint64 { return uint64(prod)<<32 | uint64(id[0]) }
	add := func(b int64, prod uint32, id string, want bool) {
		t.Helper()
		got, first := st.addHash(st.bucket(b), 42, prod, id, digest(prod, id))
		if got != want {
			t.Fatalf("add(%d, %d, %q) = %v, want %v", b, prod, id, got, want)
		}
		if !got && first != digest(prod, id) {
			t.Fatalf("add(%d, %d, %q): first digest %x, want %x", b, prod, id, first, digest(prod, id))
		}
	}
	add(0, 0, "a", true)
	add(0, 0, "b", true)
	add(0, 1, "a", true)
	add(0, 0, "a", false)
	add(0, 0, "b", false)
	add(0, 1, "a", false)
	add(1, 0, "b", true) // another bucket: another occurred_at
	add(1, 0, "b", false)
	if st.len() != 4 || len(st.buckets[0].collide) != 2 {
		t.Fatalf("len %d, collide %d", st.len(), len(st.buckets[0].collide))
	}
	st.expire(1)
	add(1, 0, "b", false)
	add(1, 0, "c", true)
	add(1, 0, "c", false)
	if st.len() != 2 {
		t.Fatalf("len %d after release", st.len())
	}
}

// model is the obviously correct dedupe set the Set is checked against.
type model struct {
	horizon    time.Duration
	bucket     time.Duration
	seen       map[string]first // identity -> its first copy
	w          time.Time
	lateBefore time.Time
}

// first is what the model keeps of an identity's first copy.
type first struct {
	at     time.Time
	digest uint64
}

// observe returns the verdict the model requires, or ok=false when
// any verdict but Late is right: an identity seen before but already
// behind the horizon, which the set may still remember (it releases
// memory by bucket, and by seq low-water mark). want is the first
// digest a Conflict must name.
func (m *model) observe(producer string, hasSeq bool, seq uint64, id string, occurred time.Time, digest uint64) (r Result, want uint64, ok bool) {
	if !m.lateBefore.IsZero() && occurred.Before(m.lateBefore) {
		return Late, 0, true
	}
	k := fmt.Sprintf("%q/id/%q/%d", producer, id, floorDiv(occurred.UnixNano(), int64(m.bucket)))
	if hasSeq {
		k = fmt.Sprintf("%q/seq/%d", producer, seq)
	}
	f, seen := m.seen[k]
	switch {
	case !seen:
		return Fresh, 0, true
	case f.at.Before(m.lateBefore):
		return 0, 0, false
	case f.digest == digest:
		return Duplicate, 0, true
	}
	return Conflict, f.digest, true
}

// record notes the set's verdict.
func (m *model) record(producer string, hasSeq bool, seq uint64, id string, occurred time.Time, digest uint64, r Result) {
	if r != Fresh {
		return
	}
	k := fmt.Sprintf("%q/id/%q/%d", producer, id, floorDiv(occurred.UnixNano(), int64(m.bucket)))
	if hasSeq {
		k = fmt.Sprintf("%q/seq/%d", producer, seq)
	}
	m.seen[k] = first{occurred, digest}
}

func (m *model) advance(w time.Time) {
	if w.After(m.w) {
		m.w = w
		if c := w.Add(-m.horizon); c.After(m.lateBefore) {
			m.lateBefore = c
		}
	}
}

// op is one random step: an observation (redeliveries included) or a
// watermark move.
type op struct {
	advance  bool
	producer string
	hasSeq   bool
	seq      uint64
	id       string
	at       time.Time
	digest   uint64
}

// randomOps returns a workload of seq and id producers (p0 with
// contiguous seqs, except for a rare one from the past and a rare
// math.MaxUint64) with redeliveries,
// conflicting repeats (an identity again with another digest), out-of-order
// and late events, and a watermark trailing event time.
func randomOps(seed uint64, n int) []op {
	r := rand.New(rand.NewPCG(seed, 1))
	var ops []op
	var past []op
	seqs := map[string]uint64{}
	now := t0
	for range n {
		switch x := r.IntN(100); {
		case x < 5:
			ops = append(ops, op{advance: true, at: now.Add(-time.Duration(r.IntN(30)) * time.Minute)})
		case x < 25 && len(past) > 0: // a redelivery, possibly a stale one
			ops = append(ops, past[r.IntN(len(past))])
		case x < 30 && len(past) > 0: // a conflict: the identity with other content
			o := past[r.IntN(len(past))]
			o.digest = 1 + r.Uint64N(1<<40)
			ops = append(ops, o)
		default:
			now = now.Add(time.Duration(r.IntN(120)) * time.Second)
			o := op{producer: fmt.Sprintf("p%d", r.IntN(6)), at: now.Add(-time.Duration(r.IntN(90)) * time.Minute), digest: 1 + r.Uint64N(1<<40)}
			if o.producer < "p3" {
				o.hasSeq = true
				step := uint64(1 + r.IntN(3))
				if o.producer == "p0" { // contiguous, as a node-agent's
					step = 1
				}
				seqs[o.producer] += step
				o.seq = seqs[o.producer]
				if o.producer == "p2" {
					o.seq += 1 << 33
				}
				if r.IntN(10) == 0 && (o.producer != "p0" || r.IntN(20) == 0) { // a seq from the past, never sent before
					o.seq -= uint64(r.IntN(200))
				}
				if o.producer == "p0" && r.IntN(400) == 0 { // the greatest seq there is, after a run
					o.seq = math.MaxUint64
				}
			} else {
				o.id = fmt.Sprintf("ev-%d", r.IntN(5000))
			}
			ops = append(ops, o)
			past = append(past, o)
		}
	}
	return ops
}

func TestAgainstModel(t *testing.T) {
	for seed := range uint64(5) {
		opts := Options{Horizon: 2 * time.Hour, Bucket: 20 * time.Minute}
		s, m := New(opts), &model{horizon: opts.Horizon, bucket: opts.Bucket, seen: map[string]first{}}
		conflicts := 0
		for i, o := range randomOps(seed, 20000) {
			if o.advance {
				s.Advance(o.at)
				m.advance(o.at)
				continue
			}
			got := s.Observe(o.producer, o.hasSeq, o.seq, o.id, o.at, o.digest)
			want, wantFirst, ok := m.observe(o.producer, o.hasSeq, o.seq, o.id, o.at, o.digest)
			if ok && got != want || !ok && got == Late {
				t.Fatalf("seed %d op %d %+v: %v, want %v", seed, i, o, got, want)
			}
			if ok && got == Conflict {
				conflicts++
				if s.FirstDigest() != wantFirst {
					t.Fatalf("seed %d op %d %+v: conflict with first digest %x, want %x", seed, i, o, s.FirstDigest(), wantFirst)
				}
			}
			m.record(o.producer, o.hasSeq, o.seq, o.id, o.at, o.digest, got)
		}
		if conflicts < 50 {
			t.Fatalf("seed %d: %d conflicts checked: the workload does not exercise them", seed, conflicts)
		}
		s.Advance(t0.Add(1000 * time.Hour))
		if s.Len() != 0 || s.Producers() != 0 || len(s.ids.buckets) != 0 {
			t.Fatalf("seed %d: %d identities, %d producers, %d buckets left past the horizon", seed, s.Len(), s.Producers(), len(s.ids.buckets))
		}
	}
}

func TestAllocationFree(t *testing.T) {
	s := New(DefaultOptions())
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprintf("01JD3Q9R6V8M2Q2Y5K3W%06d", i)
	}
	for i, id := range ids {
		s.Observe("scanner", true, uint64(i), "", t0, 1)
		s.Observe("gateway", false, 0, id, t0, 1)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s.Observe("scanner", true, uint64(i%4096), "", t0, 1)
		s.Observe("gateway", false, 0, ids[i%4096], t0, 1)
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per redelivered event", allocs)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{}, {Horizon: time.Hour}, {Horizon: time.Hour, Bucket: 2 * time.Hour}} {
		if o.Validate() == nil {
			t.Fatalf("%+v validated", o)
		}
	}
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestSeqRuns checks that contiguous seqs are kept as a run without a
// bitmap, that a gap moves them into the bitmaps with the same answers,
// and that expiry turns contiguous bitmaps back into a run.
func TestSeqRuns(t *testing.T) {
	opts := Options{Horizon: 2 * time.Hour, Bucket: 20 * time.Minute}
	s := New(opts)
	for i := range uint64(1000) {
		if got := s.Observe("agent", true, 1<<32-500+i, "", at(time.Duration(i)*time.Second), 1); got != Fresh {
			t.Fatalf("seq %d: %v", i, got)
		}
	}
	p := s.prods[s.names["agent"]]
	if p.lo != nil || p.hi != nil || p.run != (seqRange{1<<32 - 500, 1<<32 + 500}) {
		t.Fatalf("contiguous seqs: run %v, bitmaps %v %v", p.run, p.lo != nil, p.hi != nil)
	}
	if got := s.Observe("agent", true, 1<<32+10, "", at(time.Hour), 1); got != Duplicate {
		t.Fatalf("a seq of the run: %v", got)
	}
	// A gap, across 2^32: the run goes into both bitmaps.
	if got := s.Observe("agent", true, 1<<32+600, "", at(time.Hour), 1); got != Fresh {
		t.Fatalf("after a gap: %v", got)
	}
	if p.run.lo != p.run.hi || p.lo == nil || p.hi == nil || s.Len() != 1001 {
		t.Fatalf("after a gap: run %v, bitmaps %v %v, %d seqs", p.run, p.lo != nil, p.hi != nil, s.Len())
	}
	for _, seq := range []uint64{1<<32 - 500, 1<<32 - 1, 1 << 32, 1<<32 + 499, 1<<32 + 600} {
		if got := s.Observe("agent", true, seq, "", at(time.Hour), 1); got != Duplicate {
			t.Fatalf("seq %d after the spill: %v", seq, got)
		}
	}
	for seq := uint64(1<<32 + 601); seq < 1<<32+700; seq++ {
		s.Observe("agent", true, seq, "", at(3*time.Hour), 1)
	}
	// The first hours expire (the seq after the gap with them): left are
	// the seqs of the third hour, contiguous again.
	s.Advance(at(4*time.Hour + 30*time.Minute))
	if p.lo != nil || p.hi != nil || p.run != (seqRange{1<<32 + 601, 1<<32 + 700}) || s.Len() != 99 {
		t.Fatalf("after expiry: run %v, bitmaps %v %v, %d seqs", p.run, p.lo != nil, p.hi != nil, s.Len())
	}
	if got := s.Observe("agent", true, 1<<32+700, "", at(4*time.Hour), 1); got != Fresh || p.run.hi != 1<<32+701 {
		t.Fatalf("the next seq: %v, run %v", got, p.run)
	}
}

// TestSeqMax checks the greatest seq there is, which a run cannot hold
// (it ends one past its last seq), sent by a producer whose seqs were a
// run: the run goes into the bitmaps with it, its seqs stay applied, and
// the set's snapshot loads.
func TestSeqMax(t *testing.T) {
	opts := Options{Horizon: 2 * time.Hour, Bucket: 20 * time.Minute}
	s := New(opts)
	for seq := uint64(1); seq <= 3; seq++ {
		if got := s.Observe("agent", true, seq, "", at(time.Minute), seq); got != Fresh {
			t.Fatalf("seq %d: %v", seq, got)
		}
	}
	if got := s.Observe("agent", true, math.MaxUint64, "", at(time.Minute), 99); got != Fresh {
		t.Fatalf("the greatest seq: %v", got)
	}
	check := func(s *Set, when string) {
		t.Helper()
		for seq := uint64(1); seq <= 3; seq++ {
			if got := s.Observe("agent", true, seq, "", at(time.Minute), seq); got != Duplicate {
				t.Fatalf("%s: seq %d again: %v", when, seq, got)
			}
		}
		if got := s.Observe("agent", true, math.MaxUint64, "", at(time.Minute), 99); got != Duplicate {
			t.Fatalf("%s: the greatest seq again: %v", when, got)
		}
		if got := s.Observe("agent", true, math.MaxUint64, "", at(time.Minute), 7); got != Conflict || s.FirstDigest() != 99 {
			t.Fatalf("%s: the greatest seq with other content: %v, first digest %d", when, got, s.FirstDigest())
		}
		if s.Len() != 4 {
			t.Fatalf("%s: %d seqs, want 4", when, s.Len())
		}
	}
	check(s, "live")
	check(load(t, opts, snapshot(s)), "restored")
	if got := s.Observe("agent", true, 4, "", at(2*time.Minute), 4); got != Fresh {
		t.Fatalf("the next seq: %v", got)
	}
	s.Advance(at(5 * time.Hour))
	if s.Len() != 0 || s.Producers() != 0 {
		t.Fatalf("past the horizon: %d seqs, %d producers", s.Len(), s.Producers())
	}
}
