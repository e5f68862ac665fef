package dedupe

import (
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// producer is what the set keeps per producer.
type producer struct {
	name string
	idx  uint32
	// newest is the latest bucket of an applied event; once it is
	// released, nothing of the producer is left.
	newest int64
	// run is the applied seqs while they are contiguous, [run.lo,
	// run.hi): a producer's seqs come in order, each one more than the
	// last, and most producers (a node-agent each) never need a bitmap.
	// The first seq that does not extend the run moves it into the
	// bitmaps, which then hold every applied seq; expire moves them back
	// into a run once they are contiguous again.
	run seqRange
	lo  *roaring.Bitmap   // applied seqs below 2^32 (empty run)
	hi  *roaring64.Bitmap // applied seqs from 2^32 (empty run)
	// spans holds, per live bucket in ascending order, the least seq
	// applied with an occurred_at in it.
	spans []span
}

// seqRange is the seqs [lo, hi); empty when lo == hi.
type seqRange struct{ lo, hi uint64 }

type span struct {
	bucket int64
	min    uint64
}

// addSeq adds seq and reports whether it was absent.
func (p *producer) addSeq(seq uint64) bool {
	if p.lo == nil && p.hi == nil && seq != math.MaxUint64 {
		switch r := &p.run; {
		case r.lo == r.hi:
			r.lo, r.hi = seq, seq+1
			return true
		case seq == r.hi:
			r.hi++
			return true
		case seq >= r.lo && seq < r.hi:
			return false
		}
		p.spill()
	}
	if seq <= math.MaxUint32 {
		if p.lo == nil {
			p.lo = roaring.New()
		}
		return p.lo.CheckedAdd(uint32(seq))
	}
	if p.hi == nil {
		p.hi = roaring64.New()
	}
	return p.hi.CheckedAdd(seq)
}

// spill moves the run into the bitmaps.
func (p *producer) spill() {
	r := p.run
	p.run = seqRange{}
	if r.lo == r.hi {
		return
	}
	if r.lo < 1<<32 {
		if p.lo == nil {
			p.lo = roaring.New()
		}
		p.lo.AddRange(r.lo, min(r.hi, 1<<32))
	}
	if r.hi > 1<<32 {
		if p.hi == nil {
			p.hi = roaring64.New()
		}
		p.hi.AddRange(max(r.lo, 1<<32), r.hi)
	}
}

// unspill moves the bitmaps back into a run once they hold contiguous
// seqs (or none).
func (p *producer) unspill() {
	var r seqRange
	switch {
	case p.hi == nil || p.hi.IsEmpty():
		if p.lo != nil && !p.lo.IsEmpty() {
			r = seqRange{uint64(p.lo.Minimum()), uint64(p.lo.Maximum()) + 1}
			if r.hi-r.lo != p.lo.GetCardinality() {
				return
			}
		}
	case p.lo == nil || p.lo.IsEmpty():
		if top := p.hi.Maximum(); top != math.MaxUint64 {
			r = seqRange{p.hi.Minimum(), top + 1}
			if r.hi-r.lo != p.hi.GetCardinality() {
				return
			}
		} else {
			return
		}
	default:
		return
	}
	p.run, p.lo, p.hi = r, nil, nil
}

// noteSeq lowers bucket b's least seq to seq.
func (p *producer) noteSeq(b int64, seq uint64) {
	i := len(p.spans)
	if i > 0 && p.spans[i-1].bucket == b { // the common case: in order
		p.spans[i-1].min = min(p.spans[i-1].min, seq)
		return
	}
	for i > 0 && p.spans[i-1].bucket > b {
		i--
	}
	if i > 0 && p.spans[i-1].bucket == b {
		p.spans[i-1].min = min(p.spans[i-1].min, seq)
		return
	}
	p.spans = append(p.spans, span{})
	copy(p.spans[i+1:], p.spans[i:])
	p.spans[i] = span{b, seq}
}

// expire drops the spans below bucket eb and the seqs of their events:
// every seq below the least of the live spans' minima.
func (p *producer) expire(eb int64) {
	n := 0
	for n < len(p.spans) && p.spans[n].bucket < eb {
		n++
	}
	if n == 0 {
		return
	}
	p.spans = append(p.spans[:0], p.spans[n:]...)
	if len(p.spans) == 0 {
		p.run, p.lo, p.hi = seqRange{}, nil, nil
		return
	}
	low := uint64(math.MaxUint64)
	for _, sp := range p.spans {
		low = min(low, sp.min)
	}
	if p.lo == nil && p.hi == nil {
		p.run.lo = min(max(p.run.lo, low), p.run.hi)
		return
	}
	// No RunOptimize: adding to a run container recounts its runs, which
	// made Observe ten times slower on seqs with gaps (bench/dedupe).
	if p.lo != nil {
		p.lo.RemoveRange(0, min(low, 1<<32))
	}
	if p.hi != nil && low > 1<<32 {
		p.hi.RemoveRange(1<<32, low)
	}
	p.unspill()
}

func (p *producer) seqCount() int {
	n := int(p.run.hi - p.run.lo)
	if p.lo != nil {
		n += int(p.lo.GetCardinality())
	}
	if p.hi != nil {
		n += int(p.hi.GetCardinality())
	}
	return n
}
