// Package intern maps strings that repeat (states, versions, domains,
// fingerprints, correlation ids) to small integer symbols, so that state
// kept per identity holds 4-byte symbols instead of 16-byte string headers
// with their own copies.
//
// A Table only grows; its owner bounds it by rebuilding it from the live
// state once it has doubled (see ownerstate and nodeagent), so a producer
// that sends a new value with every event costs at most twice the distinct
// values currently held. A Table is not safe for concurrent use.
package intern

import (
	"encoding/binary"
	"strings"
	"unsafe"
)

// Sym is an interned string of one Table.
type Sym uint32

// Table interns strings.
type Table struct {
	ids  map[string]Sym
	strs []string
	// recent is a direct-mapped cache in front of ids. Most lookups are
	// of a few hot values (states, products, domains, the correlation id
	// of the scan being applied) among many cold ones (versions, route
	// targets), and a hit compares one string in a small array instead
	// of probing a map of every value, a cache miss or two at millions of
	// values.
	recent [recentSize]entry
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
	t := &Table{ids: make(map[string]Sym, 2*len(fixed)), strs: make([]string, 0, 2*len(fixed))}
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
	if id, ok := t.ids[s]; ok {
		// A value found in the map takes the slot the second time in a
		// row it lands there: a cold value (one of millions, looked up
		// once in a while) does not evict a hot one, nor pay the cache
		// miss of reading its interned copy.
		if c := uint32(h); e.cand != c {
			e.cand = c
		} else {
			*e = entry{s: t.strs[id], h: h, id: id + 1, cand: c}
		}
		return id
	}
	s = strings.Clone(s)
	id := Sym(len(t.strs))
	t.strs = append(t.strs, s)
	t.ids[s] = id
	*e = entry{s: s, h: h, id: id + 1, cand: uint32(h)}
	return id
}

// Str returns the string of id.
func (t *Table) Str(id Sym) string { return t.strs[id] }

// Len returns the number of symbols.
func (t *Table) Len() int { return len(t.strs) }
