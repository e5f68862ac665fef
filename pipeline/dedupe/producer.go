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
	lo     *roaring.Bitmap   // applied seqs below 2^32
	hi     *roaring64.Bitmap // applied seqs from 2^32
	// spans holds, per live bucket in ascending order, the least seq
	// applied with an occurred_at in it.
	spans []span
}

type span struct {
	bucket int64
	min    uint64
}

// addSeq adds seq and reports whether it was absent.
func (p *producer) addSeq(seq uint64) bool {
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
		p.lo, p.hi = nil, nil
		return
	}
	low := uint64(math.MaxUint64)
	for _, sp := range p.spans {
		low = min(low, sp.min)
	}
	// No RunOptimize: adding to a run container recounts its runs, which
	// made Observe ten times slower on seqs with gaps (bench/dedupe).
	if p.lo != nil {
		p.lo.RemoveRange(0, min(low, 1<<32))
	}
	if p.hi != nil && low > 1<<32 {
		p.hi.RemoveRange(1<<32, low)
	}
}

func (p *producer) seqCount() int {
	n := 0
	if p.lo != nil {
		n += int(p.lo.GetCardinality())
	}
	if p.hi != nil {
		n += int(p.hi.GetCardinality())
	}
	return n
}
