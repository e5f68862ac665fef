// Package dedupe remembers which events were applied, exactly: two
// distinct events are never merged, whatever their hashes.
//
// The dedupe identity of an event is (producer, seq) when the producer
// sends seq, else (producer, event_id) (CONTRACT section 2). Sequences are
// dense per producer, so they live in one compressed bitmap per producer
// (roaring), which costs well under a byte per event in the steady state.
// Event ids are kept as exact strings.
package dedupe

import (
	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// Set is an exact set of applied event identities. It is not safe for
// concurrent use; each partition worker owns one.
type Set struct {
	// seqs holds, per producer, the sequence numbers already applied.
	seqs map[string]*roaring64.Bitmap
	// ids holds producer + "\x00" + event_id for events without seq.
	ids map[string]struct{}
}

// New returns an empty Set.
func New() *Set {
	return &Set{seqs: make(map[string]*roaring64.Bitmap), ids: make(map[string]struct{})}
}

// Observe records the event identity and reports whether it had been seen
// before (a redelivery).
func (s *Set) Observe(producer string, hasSeq bool, seq uint64, eventID string) (dup bool) {
	if hasSeq {
		b := s.seqs[producer]
		if b == nil {
			b = roaring64.New()
			s.seqs[producer] = b
		}
		return !b.CheckedAdd(seq)
	}
	k := producer + "\x00" + eventID
	if _, ok := s.ids[k]; ok {
		return true
	}
	s.ids[k] = struct{}{}
	return false
}

// Len returns the number of identities remembered.
func (s *Set) Len() int {
	n := len(s.ids)
	for _, b := range s.seqs {
		n += int(b.GetCardinality())
	}
	return n
}
