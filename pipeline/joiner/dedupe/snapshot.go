package dedupe

import (
	"fmt"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/driftline/driftline/pipeline/stream/snap"
)

const (
	snapSection = "dedupe"
	// snapVersion 2 added the producers' runs of contiguous seqs; 3 the
	// content digests of seqs and ids. Sections of versions 1 and 2 still
	// load, their identities with digest 0 ("not known": a repeat of one
	// is taken for a redelivery, as before digests).
	snapVersion = 3
)

// maxLegacySeqs bounds the seqs of one producer in a section of version 2
// or older, which carries no digest count to check against the bytes
// left: each gets a digest 0, 8 bytes, and a corrupt run length must not
// allocate without bound.
const maxLegacySeqs = 1 << 24

// SnapshotSize returns an upper bound of the bytes AppendSnapshot
// appends, without serialising anything: a caller sizes its buffer
// with it, so that the snapshot of a set of millions of seqs and ids is
// not grown, and copied, a dozen times on the way.
func (s *Set) SnapshotSize() int {
	const varint = 10 // the longest varint
	n := len(snapSection) + 1 + 1 + 5*varint
	for _, p := range s.prods {
		if p == nil {
			continue
		}
		n += varint + len(p.name) + 3*varint + 2*varint*len(p.spans) + 2*varint
		if p.lo != nil && !p.lo.IsEmpty() {
			n += varint + int(p.lo.GetSerializedSizeInBytes())
		} else {
			n += varint
		}
		if p.hi != nil && !p.hi.IsEmpty() {
			n += varint + int(p.hi.GetSerializedSizeInBytes())
		} else {
			n += varint
		}
		n += varint + 8*len(p.digs)
	}
	n += varint
	for i := range s.ids.buckets {
		bk := &s.ids.buckets[i]
		n += 2 * varint
		// An arena entry (entryHead, the id's length, the id) takes as
		// many bytes as its snapshot (producer number, length, id,
		// digest) but for the producer number's varint, 5 bytes at most
		// against 4.
		for _, c := range bk.chunks {
			n += len(s.ids.chunks[c])
		}
		n += len(bk.index)
		for key := range bk.collide {
			n += varint + varint + len(key) + 8
		}
	}
	return n
}

// AppendSnapshot appends the set's state to w as one versioned section.
// Producer indexes are renumbered densely and ids are written as strings,
// so the snapshot does not depend on the hash or on arena layout.
//
// Layout: bucket width, watermark, late-before, first live bucket; the
// producers (name, newest bucket, spans, the run of contiguous seqs as
// its first seq and length, the two seq bitmaps in roaring's portable
// format, the seqs' digests in seq order, 8 bytes each); the id buckets
// (key, then each identity as producer number, id and digest).
func (s *Set) AppendSnapshot(w *snap.Writer) {
	w.Header(snapSection, snapVersion)
	w.Varint(s.width)
	w.Varint(s.w)
	w.Varint(s.lateBefore)
	w.Varint(s.expired)

	renum := make([]uint32, len(s.prods))
	w.Uvarint(uint64(len(s.names)))
	n := uint32(0)
	for i, p := range s.prods {
		if p == nil {
			continue
		}
		renum[i] = n
		n++
		w.String(p.name)
		w.Varint(p.newest)
		w.Uvarint(uint64(len(p.spans)))
		for _, sp := range p.spans {
			w.Varint(sp.bucket)
			w.Uvarint(sp.min)
		}
		w.Uvarint(p.run.lo)
		w.Uvarint(p.run.hi - p.run.lo)
		w.Bytes(bitmapBytes(p.lo))
		w.Bytes(bitmap64Bytes(p.hi))
		if len(p.digs) != p.seqCount() {
			panic("BUG: dedupe: digests out of step with the seqs")
		}
		w.Uvarint(uint64(len(p.digs)))
		for _, d := range p.digs {
			w.Uint64(d)
		}
	}

	w.Uvarint(uint64(len(s.ids.buckets)))
	for i := range s.ids.buckets {
		bk := &s.ids.buckets[i]
		w.Varint(bk.key)
		w.Uvarint(uint64(len(bk.index) + len(bk.collide)))
		s.ids.each(bk, func(prod uint32, id []byte, digest uint64) {
			w.Uvarint(uint64(renum[prod]))
			w.Bytes(id)
			w.Uint64(digest)
		})
	}
}

func bitmapBytes(b *roaring.Bitmap) []byte {
	if b == nil || b.IsEmpty() {
		return nil
	}
	out, err := b.ToBytes()
	if err != nil {
		panic("BUG: dedupe: serialise a bitmap: " + err.Error()) // writes to memory
	}
	return out
}

func bitmap64Bytes(b *roaring64.Bitmap) []byte {
	if b == nil || b.IsEmpty() {
		return nil
	}
	out, err := b.ToBytes()
	if err != nil {
		panic("BUG: dedupe: serialise a bitmap: " + err.Error())
	}
	return out
}

// LoadSnapshot replaces the set's state with the section AppendSnapshot
// wrote, read from r. The restored set answers every Observe exactly as
// the original would. It keeps the snapshot's bucket width; the horizon is
// the set's own option (the late-before point never moves back, so a
// longer horizon than the snapshot's takes effect once the watermark has
// moved past it). On error the set is left empty and r holds the error.
func (s *Set) LoadSnapshot(r *snap.Reader) (err error) {
	version := r.HeaderIn(snapSection, 1, snapVersion)
	width := r.Varint()
	if r.Err() == nil && width <= 0 {
		r.Fail(fmt.Errorf("%w: bucket width %d", ErrSnapshot, width))
	}
	if r.Err() != nil {
		s.reset(int64(s.opts.Bucket))
		return r.Err()
	}
	s.reset(width)
	defer func() {
		if err != nil {
			r.Fail(err)
			s.reset(int64(s.opts.Bucket))
		}
	}()
	s.w, s.lateBefore, s.expired = r.Varint(), r.Varint(), r.Varint()

	np := r.Count(4)
	for range np {
		name := r.String()
		if r.Err() != nil {
			return r.Err()
		}
		if _, dup := s.names[name]; dup {
			return fmt.Errorf("%w: producer %q twice", ErrSnapshot, name)
		}
		p := s.producer(name)
		p.newest = r.Varint()
		ns := r.Count(2)
		p.spans = make([]span, 0, ns)
		for range ns {
			sp := span{r.Varint(), r.Uvarint()}
			if k := len(p.spans); k > 0 && sp.bucket <= p.spans[k-1].bucket {
				return fmt.Errorf("%w: producer %q: spans out of order", ErrSnapshot, name)
			}
			p.spans = append(p.spans, sp)
		}
		if version >= 2 {
			lo, n := r.Uvarint(), r.Uvarint()
			if n > math.MaxUint64-lo {
				return fmt.Errorf("%w: producer %q: a run of %d seqs from %d", ErrSnapshot, name, n, lo)
			}
			p.run = seqRange{lo, lo + n}
		}
		if b := r.Bytes(); len(b) > 0 {
			p.lo = roaring.New()
			if err := readBitmap(func() error { return p.lo.UnmarshalBinary(b) }, p.lo.Validate); err != nil {
				return fmt.Errorf("%w: producer %q: %w", ErrSnapshot, name, err)
			}
		}
		if b := r.Bytes(); len(b) > 0 {
			p.hi = roaring64.New()
			if err := readBitmap(func() error { return p.hi.UnmarshalBinary(b) }, p.hi.Validate); err != nil {
				return fmt.Errorf("%w: producer %q: %w", ErrSnapshot, name, err)
			}
		}
		if p.run.lo != p.run.hi && (p.lo != nil || p.hi != nil) {
			return fmt.Errorf("%w: producer %q: a run and bitmaps", ErrSnapshot, name)
		}
		switch {
		case p.hi != nil && !p.hi.IsEmpty():
			p.top = p.hi.Maximum()
		case p.lo != nil && !p.lo.IsEmpty():
			p.top = uint64(p.lo.Maximum())
		}
		seqs := p.seqCount()
		if version >= 3 {
			nd := r.Count(8)
			if r.Err() == nil && nd != seqs {
				return fmt.Errorf("%w: producer %q: %d digests for %d seqs", ErrSnapshot, name, nd, seqs)
			}
			p.digs = make([]uint64, nd)
			for i := range p.digs {
				p.digs[i] = r.Uint64()
			}
		} else {
			if seqs > maxLegacySeqs {
				return fmt.Errorf("%w: producer %q: %d seqs in a version %d section", ErrSnapshot, name, seqs, version)
			}
			p.digs = make([]uint64, seqs)
		}
	}

	nb := r.Count(2)
	prev := int64(math.MinInt64)
	for i := range nb {
		key := r.Varint()
		if r.Err() != nil {
			return r.Err()
		}
		if i > 0 && key <= prev {
			return fmt.Errorf("%w: id buckets out of order", ErrSnapshot)
		}
		prev = key
		ne := r.Count(2)
		for range ne {
			prod, id := r.Uvarint(), r.Bytes()
			var digest uint64
			if version >= 3 {
				digest = r.Uint64()
			}
			if r.Err() != nil {
				return r.Err()
			}
			if prod >= uint64(np) {
				return fmt.Errorf("%w: producer number %d of %d", ErrSnapshot, prod, np)
			}
			if added, _ := s.ids.add(key, uint32(prod), string(id), digest); !added {
				return fmt.Errorf("%w: id %q twice", ErrSnapshot, id)
			}
		}
	}
	return r.Err()
}

// readBitmap runs read and then validate, turning a panic of the bitmap
// library on malformed input into an error.
func readBitmap(read, validate func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed bitmap: %v", p)
		}
	}()
	if err := read(); err != nil {
		return err
	}
	return validate()
}
