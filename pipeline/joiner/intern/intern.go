// Package intern maps strings that repeat (states, versions, domains,
// fingerprints, correlation ids) to small integer symbols, so that state
// kept per identity holds 4-byte symbols instead of 16-byte string headers
// with their own copies.
//
// A Table only grows; its owner bounds it by rebuilding it from the live
// state once it has doubled (see ownerstate and nodeagent), so a producer
// that sends a new value with every event costs at most twice the distinct
// values currently held. A Table is not safe for concurrent use.
//
// A Table holds no pointer per value: the strings are copied back to back
// into large byte chunks, and both the symbols' locations and the hash
// index are flat arrays of integers. A joiner's tables hold millions of
// values, and a table of strings (one allocation per value, a map keyed
// by string headers) was millions of objects for the garbage collector to
// mark at every cycle. A string returned by Str points into a chunk,
// which is never written again once a value is in it.
package intern

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/joiner/prefetch"
)

// Sym is an interned string of one Table.
type Sym uint32

// Table interns strings.
type Table struct {
	// chunks hold the interned bytes; locs[sym] is where sym's are.
	chunks [][]byte
	locs   []loc
	// slots is an open-addressing (linear probing) index of the symbols
	// by hash, a power of two long, at most 3/4 full.
	slots []slot
	shift uint // 64 - log2(len(slots)): a hash's top bits pick its slot
	// recent is a direct-mapped cache in front of slots. Most lookups are
	// of a few hot values (states, products, domains, the correlation id
	// of the scan being applied) among many cold ones (versions, route
	// targets), and a hit compares one string in a small array instead
	// of probing an index of every value, a cache miss or two at millions
	// of values.
	recent [recentSize]entry
}

// A loc is where a value's bytes are: chunk<<44 | offset<<24 | length.
type loc uint64

const (
	lenBits    = 24
	offBits    = 20
	chunkBits  = 64 - lenBits - offBits
	maxLen     = 1<<lenBits - 1
	maxChunk   = 1 << offBits // the size of a full chunk
	firstChunk = 4 << 10
)

// A slot of the index: the symbol + 1 (0: empty), the top 32 bits of its
// value's hash (most mismatches are told without reading the value, and
// they pick the slot, so that growing the index moves the slots without
// reading or hashing a value again), and its loc (a match reads the value
// without a look at locs).
type slot struct {
	sym Sym
	tag uint32
	loc loc
}

type entry struct {
	s    string
	h    uint64 // hash(s): most misses are told without reading s
	id   Sym    // the symbol + 1; 0: an empty slot
	cand uint32 // the low hash bits of the last value that missed here
}

const (
	recentBits = 10
	recentSize = 1 << recentBits
)

// hash is a cheap hash of the length and the first and last 8 bytes of
// s, enough to tell apart values that differ in a prefix or a counter at
// the end; its top bits pick the cache slot.
func hash(s string) uint64 {
	var a, b uint64
	if n := len(s); n >= 8 {
		p := unsafe.Slice(unsafe.StringData(s), n)
		a, b = binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[n-8:])
	} else {
		for i := range n {
			a = a<<8 | uint64(s[i])
		}
	}
	return (a*0x9e3779b97f4a7c15 ^ b ^ uint64(len(s))) * 0xff51afd7ed558ccd
}

// New returns a Table holding fixed as symbols 0, 1, ... in order
// (repeats keep their first symbol).
func New(fixed ...string) *Table {
	t := &Table{locs: make([]loc, 0, 2*len(fixed))}
	t.resize(max(16, 2*len(fixed)))
	for _, s := range fixed {
		t.Intern(s)
	}
	return t
}

// Intern returns the symbol of s, adding a copy of s when it is new (the
// caller's string may alias a decode buffer). It does not allocate for a
// string already interned.
func (t *Table) Intern(s string) Sym {
	h := hash(s)
	e := &t.recent[h>>(64-recentBits)]
	if e.h == h && e.id != 0 && e.s == s {
		return e.id - 1
	}
	full := xxhash.Sum64String(s)
	tag, mask := uint32(full>>32), len(t.slots)-1
	i := int(full >> t.shift)
	for {
		sl := &t.slots[i]
		if sl.sym == 0 {
			break
		}
		if sl.tag == tag && t.str(sl.loc) == s {
			id := sl.sym - 1
			// A value found in the index takes the cache slot the second
			// time in a row it lands there: a cold value (one of
			// millions, looked up once in a while) does not evict a hot
			// one.
			if c := uint32(h); e.cand != c {
				e.cand = c
			} else {
				*e = entry{s: t.str(sl.loc), h: h, id: id + 1, cand: c}
			}
			return id
		}
		i = (i + 1) & mask
	}
	id := Sym(len(t.locs))
	if uint64(id) == 1<<32-1 {
		panic("intern: table full")
	}
	l := t.store(s)
	t.locs = append(t.locs, l)
	t.slots[i] = slot{sym: id + 1, tag: tag, loc: l}
	if 4*len(t.locs) > 3*len(t.slots) {
		t.resize(2 * len(t.slots))
	}
	*e = entry{s: t.str(l), h: h, id: id + 1, cand: uint32(h)}
	return id
}

// Prefetch asks the processor for the index slot Intern(s) starts at,
// without waiting for it. A caller about to intern several values that
// are likely cold (versions, targets: one of millions each) prefetches
// them all first, so that their cache misses overlap instead of following
// one another. It changes nothing; a table that grows meanwhile only
// makes the hint useless.
func (t *Table) Prefetch(s string) {
	prefetch.Line(unsafe.Pointer(&t.slots[xxhash.Sum64String(s)>>t.shift]))
}

// store copies s into the chunks and returns its loc.
func (t *Table) store(s string) loc {
	n := len(s)
	if n == 0 {
		return 0
	}
	if n > maxLen {
		panic(fmt.Sprintf("intern: a value of %d bytes (at most %d)", n, maxLen))
	}
	c := len(t.chunks) - 1
	switch {
	case n > maxChunk/4:
		// A long value has a chunk of its own (and the next value starts
		// a new one): the chunk it would not fit in loses at most a
		// quarter of its size.
		t.chunks = append(t.chunks, make([]byte, 0, n))
		c++
	case c < 0 || len(t.chunks[c])+n > cap(t.chunks[c]):
		size := firstChunk
		if c >= 0 {
			size = min(max(2*cap(t.chunks[c]), firstChunk), maxChunk)
		}
		t.chunks = append(t.chunks, make([]byte, 0, size))
		c++
	}
	if c >= 1<<chunkBits {
		panic("intern: table full")
	}
	off := len(t.chunks[c])
	t.chunks[c] = append(t.chunks[c], s...)
	return loc(c)<<(lenBits+offBits) | loc(off)<<lenBits | loc(n)
}

// str returns the value at l.
func (t *Table) str(l loc) string {
	n := int(l & maxLen)
	if n == 0 {
		return ""
	}
	c, off := int(l>>(lenBits+offBits)), int(l>>lenBits)&(maxChunk-1)
	return unsafe.String(&t.chunks[c][off], n)
}

// resize rebuilds the index with n slots (a power of two at least n). A
// slot's tag holds the top bits of its value's hash, which pick its slot
// in an index of up to 1<<32 slots, so the values are neither read nor
// hashed again; and the old slots are taken in their order, which is
// nearly the order of the new ones, so the moves stream through memory
// instead of missing the cache once per value.
func (t *Table) resize(n int) {
	size, bits := 16, uint(4)
	for size < n {
		size, bits = size*2, bits+1
	}
	if bits > 32 {
		panic("intern: table full")
	}
	old := t.slots
	t.slots, t.shift = make([]slot, size), 64-bits
	mask := size - 1
	for _, sl := range old {
		if sl.sym == 0 {
			continue
		}
		i := int(sl.tag >> (32 - bits))
		for t.slots[i].sym != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = sl
	}
}

// Str returns the string of id.
func (t *Table) Str(id Sym) string { return t.str(t.locs[id]) }

// Len returns the number of symbols.
func (t *Table) Len() int { return len(t.locs) }
