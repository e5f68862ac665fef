// Package dedupe remembers which events were applied, exactly: two
// distinct events are never merged, whatever their hashes.
//
// The dedupe identity of an event is (producer, seq) when the producer
// sends seq, else (producer, event_id) (CONTRACT section 2).
//
// # Horizon
//
// Memory is bounded in event time. The owner moves the partition's
// watermark forward with Advance; an event that occurred before
// watermark - Options.Horizon (24h by default) can no longer be checked and
// Observe reports it Late: the caller drops it and counts it. Such an event
// would change nothing anyway (the engine already holds newer observations
// and record versions than a day-old one), and the verdict depends only on
// the event and the watermark, so a replay drops exactly the same events.
// The point below which events are Late never moves back, even when a
// restored set is given a longer horizon, so nothing forgotten is ever
// taken for new.
//
// Identities are grouped by occurred_at into buckets (Options.Bucket, 1h by
// default) and a bucket is released whole once all of it is before the
// horizon: the set holds Horizon + Bucket of event time at most.
//
// A redelivery repeats the event, occurred_at included, so it is always
// caught within the horizon. A producer that re-sends an event_id with a
// different occurred_at is caught only when both fall in the same bucket:
// event ids are looked up in the bucket of their occurred_at. A seq is
// looked up among all the producer's live seqs, whatever its occurred_at.
//
// # Representation
//
// Sequences are dense per producer. While a producer's live seqs are
// contiguous (each seq one more than the last, as a node-agent sends
// them), they are kept as a range, two integers. Once a seq leaves a gap
// or comes out of order, they move into a roaring bitmap (32-bit for seq
// < 2^32, 64-bit above): one bit per seq value in a dense 65536-seq
// block, so under one byte per event while a producer's gaps average
// under 8, and 2 bytes per event at most when sparser; they move back
// into a range when a release leaves them contiguous. A fleet has a
// producer per node-agent, each with a few live events, and a bitmap
// per producer was five heap objects more for the garbage collector to
// visit at every cycle (bench/dedupe). Each producer also keeps, per live bucket, the least seq
// applied with an occurred_at in it; when buckets are released, every seq
// below the least of the live buckets' minima belongs to released events
// and is removed from the range or the bitmap.
//
// Event ids are kept exactly, copied into 64 KiB arenas, and indexed per
// bucket by a map from their 64-bit xxhash (mixed with the producer) to
// their arena position; a hash hit is confirmed by comparing the stored
// bytes, and an identity whose hash another one already holds goes to a
// small exact overflow map. The index holds no pointers (the garbage
// collector does not scan it), nothing is allocated per event, and a
// released bucket's index is dropped whole (deleting from a long-lived Go
// map leaves tombstones that slow every later lookup). bench/dedupe
// measures these choices against the alternatives.
package dedupe

import (
	"math"
	"time"
)

// Result is the verdict of Observe.
type Result uint8

const (
	// Fresh is an identity not seen before: the caller applies the event.
	Fresh Result = iota
	// Duplicate is an identity already applied (a redelivery): the
	// caller skips the event.
	Duplicate
	// Late is an event that occurred before watermark - Horizon: it cannot
	// be checked any more, and the caller drops it (and counts it).
	Late
	// Conflict is an identity already applied with another content
	// digest: not a redelivery but a producer reusing an event_id or a
	// seq. The caller skips the event (the first one stays applied) and
	// quarantines it; FirstDigest names the first one's digest.
	Conflict
)

func (r Result) String() string {
	switch r {
	case Fresh:
		return "fresh"
	case Duplicate:
		return "duplicate"
	case Late:
		return "late"
	case Conflict:
		return "conflict"
	}
	return "unknown"
}

// Set is an exact set of applied event identities over a horizon of event
// time. It is not safe for concurrent use; each partition worker owns one.
type Set struct {
	opts    Options
	width   int64 // bucket width, ns
	horizon int64 // ns

	w int64 // watermark, Unix ns; math.MinInt64 before the first Advance
	// lateBefore is the occurred_at (Unix ns) below which events are
	// Late. It never decreases.
	lateBefore int64
	// expired is the first bucket not released: every bucket below it
	// lies before lateBefore.
	expired int64

	names map[string]uint32 // producer -> index in prods
	prods []*producer       // nil where free
	free  []uint32          // free indexes in prods
	last  *producer         // the producer of the previous Observe
	// first is the digest of the identity the last Conflict repeated.
	first uint64

	ids idSet
}

// New returns an empty Set. It panics on options that fail Validate: they
// are a programming error of the caller, which validates its
// configuration first.
func New(opts Options) *Set {
	if err := opts.Validate(); err != nil {
		panic("BUG: " + err.Error())
	}
	s := &Set{opts: opts}
	s.reset(int64(opts.Bucket))
	return s
}

func (s *Set) reset(width int64) {
	s.width = width
	s.horizon = int64(s.opts.Horizon)
	s.w, s.lateBefore, s.expired = math.MinInt64, math.MinInt64, math.MinInt64
	s.names = make(map[string]uint32)
	s.prods, s.free, s.last = nil, nil, nil
	s.ids.init()
}

// Observe records the identity of an event that occurred at occurredAt,
// with its content digest (contract.EventDigest), and reports whether it
// is Fresh (apply it), a Duplicate (the same identity and digest: skip
// it), a Conflict (the same identity, another digest: skip and quarantine
// it) or Late (drop it: see the package doc). Anything but Fresh changes
// nothing in the set. A digest of 0 stands for "not known": it matches
// any (identities restored from a snapshot of version 2 or older carry
// none).
func (s *Set) Observe(producer string, hasSeq bool, seq uint64, eventID string, occurredAt time.Time, digest uint64) Result {
	at := occurredAt.UnixNano()
	if at < s.lateBefore {
		return Late
	}
	p := s.last
	if p == nil || p.name != producer {
		p = s.producer(producer)
		s.last = p
	}
	b := floorDiv(at, s.width)
	if hasSeq {
		if !p.addSeq(seq, digest) {
			return s.repeat(p.digestOf(seq), digest)
		}
		p.noteSeq(b, seq)
	} else if added, first := s.ids.add(b, p.idx, eventID, digest); !added {
		return s.repeat(first, digest)
	}
	if b > p.newest {
		p.newest = b
	}
	return Fresh
}

// repeat judges an identity seen before with digest first.
func (s *Set) repeat(first, digest uint64) Result {
	if first == digest || first == 0 || digest == 0 {
		return Duplicate
	}
	s.first = first
	return Conflict
}

// FirstDigest returns the digest of the event first applied under the
// identity of the last Observe that returned Conflict.
func (s *Set) FirstDigest() uint64 { return s.first }

// producer returns the state of the named producer, creating it.
func (s *Set) producer(name string) *producer {
	if i, ok := s.names[name]; ok {
		return s.prods[i]
	}
	p := &producer{name: string(append([]byte(nil), name...)), newest: math.MinInt64}
	if n := len(s.free); n > 0 {
		p.idx = s.free[n-1]
		s.free = s.free[:n-1]
		s.prods[p.idx] = p
	} else {
		if len(s.prods) == math.MaxUint32 {
			panic("BUG: dedupe: 2^32 live producers")
		}
		p.idx = uint32(len(s.prods))
		s.prods = append(s.prods, p)
	}
	s.names[p.name] = p.idx
	return p
}

// Advance moves the watermark to w (if later): events that occurred
// before w - Horizon become Late, and buckets entirely before that are
// released. The joiner calls it with the partition's watermark; the zero
// time (no watermark yet) changes nothing.
func (s *Set) Advance(w time.Time) {
	if w.IsZero() {
		return
	}
	wn := w.UnixNano()
	if wn <= s.w {
		return
	}
	s.w = wn
	cut := int64(math.MinInt64)
	if wn > math.MinInt64+s.horizon {
		cut = wn - s.horizon
	}
	s.lateBefore = max(s.lateBefore, cut)
	if s.lateBefore == math.MinInt64 {
		return
	}
	if eb := floorDiv(s.lateBefore, s.width); eb > s.expired {
		s.expire(eb)
	}
}

// expire releases every bucket below eb.
func (s *Set) expire(eb int64) {
	s.expired = eb
	s.ids.expire(eb)
	for i, p := range s.prods {
		if p == nil {
			continue
		}
		p.expire(eb)
		if p.newest < eb {
			// Every event of p is in a released bucket: its id entries
			// are gone (s.ids.expire above) and so are its seqs.
			delete(s.names, p.name)
			s.prods[i] = nil
			s.free = append(s.free, uint32(i))
			if s.last == p {
				s.last = nil
			}
		}
	}
}

// Watermark returns the watermark of the last Advance (zero before).
func (s *Set) Watermark() time.Time {
	if s.w == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, s.w).UTC()
}

// LateBefore returns the event time before which events are Late (zero
// before the first Advance).
func (s *Set) LateBefore() time.Time {
	if s.lateBefore == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, s.lateBefore).UTC()
}

// Len returns the number of identities remembered.
func (s *Set) Len() int {
	n := s.ids.len()
	for _, p := range s.prods {
		if p != nil {
			n += p.seqCount()
		}
	}
	return n
}

// Producers returns the number of producers with identities remembered.
func (s *Set) Producers() int { return len(s.names) }

// floorDiv returns a/b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
