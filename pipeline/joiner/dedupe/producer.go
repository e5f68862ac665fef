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
	// digs holds the content digest of every applied seq, in seq order:
	// digs[k] is the digest of the k-th least seq of the run or the
	// bitmaps (its rank), so a digest costs 8 bytes and no key. Seqs come
	// in order, so it is appended to; expire drops the prefix of the seqs
	// it removes.
	digs []uint64
	// top is the greatest seq of the bitmaps while they hold any (set by
	// spill, addSeq and LoadSnapshot): an in-order seq appends its digest
	// without a rank, and roaring's Maximum scans a bitmap container's
	// words from the end (a microsecond on a container just begun).
	top uint64
}

// seqRange is the seqs [lo, hi); empty when lo == hi.
type seqRange struct{ lo, hi uint64 }

type span struct {
	bucket int64
	min    uint64
}

// addSeq adds seq with its content digest and reports whether it was
// absent.
func (p *producer) addSeq(seq, digest uint64) bool {
	if p.lo == nil && p.hi == nil {
		// A run ends one past its last seq, so it cannot hold
		// math.MaxUint64: that seq goes into the bitmaps with the run.
		if seq != math.MaxUint64 {
			switch r := &p.run; {
			case r.lo == r.hi:
				r.lo, r.hi = seq, seq+1
				p.digs = append(p.digs[:0], digest)
				return true
			case seq == r.hi:
				r.hi++
				p.digs = append(p.digs, digest)
				return true
			case seq >= r.lo && seq < r.hi:
				return false
			}
		}
		p.spill()
	}
	var added bool
	if seq <= math.MaxUint32 {
		if p.lo == nil {
			p.lo = roaring.New()
		}
		added = p.lo.CheckedAdd(uint32(seq))
	} else {
		if p.hi == nil {
			p.hi = roaring64.New()
		}
		added = p.hi.CheckedAdd(seq)
	}
	if added {
		if len(p.digs) == 0 || seq > p.top { // in order: the common case
			p.digs = append(p.digs, digest)
			p.top = seq
		} else {
			p.insertDigest(p.rank(seq), digest)
		}
	}
	return added
}

// rank returns the number of applied seqs below seq (the bitmaps).
func (p *producer) rank(seq uint64) int {
	if seq <= math.MaxUint32 {
		if p.lo == nil {
			return 0
		}
		return int(p.lo.Rank(uint32(seq))) - btoi(p.lo.Contains(uint32(seq)))
	}
	n := 0
	if p.lo != nil {
		n = int(p.lo.GetCardinality())
	}
	if p.hi != nil {
		n += int(p.hi.Rank(seq)) - btoi(p.hi.Contains(seq))
	}
	return n
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// insertDigest inserts d as the k-th digest.
func (p *producer) insertDigest(k int, d uint64) {
	if k >= len(p.digs) {
		p.digs = append(p.digs, d)
		return
	}
	p.digs = append(p.digs, 0)
	copy(p.digs[k+1:], p.digs[k:])
	p.digs[k] = d
}

// digestOf returns the digest seq (an applied one) was added with; 0
// when it is not known (restored from a snapshot without digests).
func (p *producer) digestOf(seq uint64) uint64 {
	var k int
	if p.lo == nil && p.hi == nil {
		k = int(seq - p.run.lo)
	} else {
		k = p.rank(seq)
	}
	if k < 0 || k >= len(p.digs) {
		return 0
	}
	return p.digs[k]
}

// dropDigests drops the digests of the n least seqs, which expire
// removed.
func (p *producer) dropDigests(n int) {
	if n <= 0 {
		return
	}
	if n >= len(p.digs) {
		p.digs = p.digs[:0]
		return
	}
	p.digs = p.digs[n:]
	// Reslicing keeps the dropped prefix allocated until the next growth:
	// copy once it is most of the array.
	if cap(p.digs) > 64 && len(p.digs) < cap(p.digs)/4 {
		p.digs = append([]uint64(nil), p.digs...)
	}
}

// spill moves the run into the bitmaps.
func (p *producer) spill() {
	r := p.run
	p.run = seqRange{}
	if r.lo == r.hi {
		return
	}
	p.top = r.hi - 1
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
		p.run, p.lo, p.hi, p.digs = seqRange{}, nil, nil, nil
		return
	}
	low := uint64(math.MaxUint64)
	for _, sp := range p.spans {
		low = min(low, sp.min)
	}
	before := p.seqCount()
	if p.lo == nil && p.hi == nil {
		p.run.lo = min(max(p.run.lo, low), p.run.hi)
		p.dropDigests(before - p.seqCount())
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
	p.dropDigests(before - p.seqCount())
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
