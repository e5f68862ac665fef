// Package claims keeps, without pointers the garbage collector scans,
// which usage_id claimed each usage key first: the memory the rater and
// the billing reconciler need per usage key to judge duplicate_usage and
// redeliveries exactly, bounded in event time.
//
// Claims live in generations, each holding the claims of usage that
// occurred in one span of event time: an arena of byte chunks (digest,
// key, usage_id) and an index from the key's 64-bit hash to its entry.
// Lookups compare the key itself, so keys whose hashes collide are told
// apart (the few that do go to a small map by key): two distinct keys are
// never merged. A caller forgets a whole generation once its span is
// past its horizon (Gens.Forget), which frees its arena at once.
package claims

import (
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/contract"
)

// Hash is the index key of a usage key.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// Generation holds the claims of usage that occurred in [Start,
// Start+span).
type Generation struct {
	// Start is the beginning of the generation's span (unix ns).
	Start int64
	// index maps the hash of a usage key to its arena entry (chunk number
	// << 32 | offset).
	index map[uint64]uint64
	// collide maps the usage keys whose hash another key of the
	// generation held when they were added to their entry; nil unless
	// 64-bit hashes collide.
	collide map[string]uint64
	chunks  [][]byte
	claims  int
}

// chunkSize is the size of an arena chunk; an entry larger than it gets a
// chunk of its own.
const chunkSize = 256 << 10

// NewGeneration returns an empty generation starting at start.
func NewGeneration(start int64) *Generation {
	return &Generation{Start: start, index: map[uint64]uint64{}}
}

// Claim is the usage that claimed a key first.
type Claim struct {
	// UsageID aliases the arena: copy it to keep it.
	UsageID []byte
	// Digest is its payload's (contract.PayloadDigest); 0 when not known.
	Digest contract.Digest
}

// Find returns the claim of key (whose Hash is h) if g holds one.
func (g *Generation) Find(h uint64, key []byte) (Claim, bool) {
	ref, ok := g.index[h]
	if !ok {
		return Claim{}, false
	}
	if !g.keyIs(ref, key) {
		if ref, ok = g.collide[string(key)]; !ok {
			return Claim{}, false
		}
	}
	d, _, id := g.entry(ref)
	return Claim{UsageID: id, Digest: d}, true
}

// Add records that usageID (payload digest d) claimed key, whose Hash is
// h; key must not be claimed in g. It reports whether the claim went to
// the collision map (Remove needs it).
func (g *Generation) Add(h uint64, key []byte, usageID string, d contract.Digest) (collided bool) {
	ref := g.append(key, usageID, d)
	g.claims++
	if _, taken := g.index[h]; taken {
		if g.collide == nil {
			g.collide = map[string]uint64{}
		}
		g.collide[string(key)] = ref
		return true
	}
	g.index[h] = ref
	return false
}

// Remove undoes the Add of key (hash h, collided as Add reported). Its
// arena bytes stay until the generation is dropped.
func (g *Generation) Remove(h uint64, key string, collided bool) {
	if collided {
		delete(g.collide, key)
	} else {
		delete(g.index, h)
	}
	g.claims--
}

// Each calls fn for every claim g holds, in no order (their bytes alias
// the arena).
func (g *Generation) Each(fn func(key []byte, c Claim)) {
	each := func(ref uint64) {
		d, key, id := g.entry(ref)
		fn(key, Claim{UsageID: id, Digest: d})
	}
	for _, ref := range g.index {
		each(ref)
	}
	for _, ref := range g.collide {
		each(ref)
	}
}

// Claims returns the number of claims g holds.
func (g *Generation) Claims() int { return g.claims }

// An arena entry is: digest (8 bytes, little endian), key length
// (uvarint), key, usage_id length (uvarint), usage_id.

// append copies a claim into the arena and returns its ref.
func (g *Generation) append(key []byte, usageID string, d contract.Digest) uint64 {
	size := 8 + binary.MaxVarintLen32*2 + len(key) + len(usageID)
	n := len(g.chunks)
	if n == 0 || cap(g.chunks[n-1])-len(g.chunks[n-1]) < size {
		g.chunks = append(g.chunks, make([]byte, 0, max(chunkSize, size)))
		n++
	}
	buf := g.chunks[n-1]
	off := len(buf)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(d))
	buf = binary.AppendUvarint(buf, uint64(len(key)))
	buf = append(buf, key...)
	buf = binary.AppendUvarint(buf, uint64(len(usageID)))
	g.chunks[n-1] = append(buf, usageID...)
	return uint64(n-1)<<32 | uint64(off)
}

// entry returns the digest, key and usage_id of the entry at ref.
func (g *Generation) entry(ref uint64) (d contract.Digest, key, usageID []byte) {
	e := g.chunks[ref>>32][uint32(ref):]
	d = contract.Digest(binary.LittleEndian.Uint64(e))
	n, k := binary.Uvarint(e[8:])
	e = e[8+k:]
	key, e = e[:n], e[n:]
	n, k = binary.Uvarint(e)
	return d, key, e[k : k+int(n)]
}

func (g *Generation) keyIs(ref uint64, key []byte) bool {
	_, k, _ := g.entry(ref)
	return string(k) == string(key)
}

// Bytes returns the memory the generation holds, approximately: its
// arena and its index (about 24 bytes a slot, maps keep up to 1/8 free).
func (g *Generation) Bytes() int {
	n := 0
	for _, c := range g.chunks {
		n += cap(c)
	}
	return n + len(g.index)*24*8/7 + len(g.collide)*64
}

// Gens are the generations of one partition, oldest first, each Span
// wide.
type Gens struct {
	// Span is the width of a generation in ns of event time.
	Span int64
	// List holds the generations by Start, oldest first.
	List []*Generation
}

// Find returns the claim of key (hash h) in the generations that end
// after floor (unix ns; generations ending earlier are forgotten even if
// not dropped yet).
func (gs *Gens) Find(h uint64, key []byte, floor int64) (Claim, bool) {
	for _, g := range gs.List {
		if g.Start+gs.Span <= floor {
			continue
		}
		if c, ok := g.Find(h, key); ok {
			return c, true
		}
	}
	return Claim{}, false
}

// Gen returns the generation holding usage that occurred at at (unix
// ns), created if need be.
func (gs *Gens) Gen(at int64) *Generation {
	m := at % gs.Span
	if m < 0 {
		m += gs.Span
	}
	start := at - m
	i, found := slices.BinarySearchFunc(gs.List, start, func(g *Generation, t int64) int {
		switch {
		case g.Start < t:
			return -1
		case g.Start > t:
			return 1
		}
		return 0
	})
	if found {
		return gs.List[i]
	}
	g := NewGeneration(start)
	gs.List = slices.Insert(gs.List, i, g)
	return g
}

// Forget drops the generations that end at or before floor (unix ns).
func (gs *Gens) Forget(floor int64) {
	gs.List = slices.DeleteFunc(gs.List, func(g *Generation) bool { return g.Start+gs.Span <= floor })
}

// Claims returns the number of claims held.
func (gs *Gens) Claims() int {
	n := 0
	for _, g := range gs.List {
		n += g.claims
	}
	return n
}

// Bytes returns the memory the claims hold, approximately.
func (gs *Gens) Bytes() int {
	n := 0
	for _, g := range gs.List {
		n += g.Bytes()
	}
	return n
}
