// Package claims keeps, without pointers the garbage collector scans,
// which usage_id claimed each usage key (each pair of metering_source and
// metering_id: AppendUsageKey) first: the memory the rater and
// the billing reconciler need per usage key to judge duplicate_usage and
// redeliveries exactly, bounded in event time.
//
// Claims live in generations, each holding the claims of usage that
// occurred in one span of event time: an arena of byte chunks (digest,
// usage_id, key) and an open-addressing table of slots from the key's
// 64-bit hash to its entry. Lookups compare the key itself, so keys whose
// hashes collide are told apart: two distinct keys are never merged. A
// key that ends as its usage_id does (a metering_id inside the usage_id,
// as gateways often build them) keeps that end once, and what is left of
// it, when that is its metering_source and the slash, is a number in a
// table of the generation's sources. A caller forgets a
// whole generation once its span is past its horizon (Gens.Forget), which
// frees its arena and table at once.
package claims

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/contract"
)

// AppendUsageKey appends to dst the key that claims the usage of the pair
// (metering_source, metering_id): contract.UsageKey, source/id, when
// source is plain (PlainSource), else a slash, the length of source in
// decimal, a slash and contract.UsageKey. Two pairs never share one, as
// duplicate_usage is judged on the pair (CONTRACT 5) while the joined
// usage key of a source that holds a slash may be another pair's
// ("gw/eu", "m-1" and "gw", "eu/m-1"): a key of the first form starts
// with its source, up to its first slash; one of the second form starts
// with a slash, which no plain source does, and its length tells the
// source from the metering_id.
func AppendUsageKey(dst []byte, source, meteringID string) []byte {
	if !PlainSource(source) {
		dst = strconv.AppendInt(append(dst, '/'), int64(len(source)), 10)
		dst = append(dst, '/')
	}
	return append(append(append(dst, source...), '/'), meteringID...)
}

// PlainSource reports whether the usage key of source and any metering_id
// (contract.UsageKey) is the key that claims their usage
// (AppendUsageKey): source is not empty and holds no slash, so the usage
// key's first slash ends it.
func PlainSource(source string) bool { return source != "" && strings.IndexByte(source, '/') < 0 }

// Hash is the index key of a usage key.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// Ref is where a claim's entry is in its generation's arena: the chunk
// number in the high bits, the offset in the chunk in the low ones.
type Ref uint64

// Generation holds the claims of usage that occurred in [Start,
// Start+span), the end cut at the largest int64 for the last generation
// (Gens).
type Generation struct {
	// Start is the beginning of the generation's span (unix ns): a
	// multiple of the span, or math.MinInt64 for the first generation.
	Start int64
	// slots is a table of linear probing, 1<<(64-shift) slots, indexed by
	// the top bits of the key's hash: 0 is empty, anything else a claim's
	// slot (the hash's top tagBits beside its Ref, slot).
	slots  []uint64
	shift  uint
	chunks [][]byte
	claims int
	// sources are the key prefixes stored once (metering_source and its
	// slash), by number; sourceOf numbers them.
	sources  [][]byte
	sourceOf map[string]uint32
}

// maxSources bounds the prefixes a generation numbers; more are stored in
// their entries.
const maxSources = 4096

// chunkSize is the size of an arena chunk; an entry larger than it gets a
// chunk of its own. Offsets fit offsetBits.
const chunkSize = 256 << 10

// A slot holds the top tagBits of the key's hash, then the chunk number
// plus one, then the offset. The tag holds every bit a table's index takes
// from the hash, so a growing table places its slots again without the
// keys: up to 1<<tagBits slots (some 50M claims) and 1<<chunkBits chunks
// (256 GiB) a generation, far beyond the memory of one process.
const (
	offsetBits = 18
	chunkBits  = 20
	tagBits    = 64 - offsetBits - chunkBits
)

// maxLoad is the share of slots a table fills before it doubles, in
// eighths; minTableBits sizes a new table.
const (
	maxLoad      = 6
	minTableBits = 10
)

// NewGeneration returns an empty generation starting at start.
func NewGeneration(start int64) *Generation {
	return &Generation{Start: start}
}

// slot packs ref and the tag of hash h.
func slot(h uint64, ref Ref) uint64 {
	return h>>(64-tagBits)<<(offsetBits+chunkBits) | (uint64(ref>>32)+1)<<offsetBits | uint64(uint32(ref))
}

// refOf returns the Ref a non-empty slot holds.
func refOf(s uint64) Ref {
	chunk := (s>>offsetBits)&(1<<chunkBits-1) - 1
	return Ref(chunk<<32 | s&(1<<offsetBits-1))
}

// tagIs reports whether slot s may hold a key of hash h.
func tagIs(s, h uint64) bool { return s>>(offsetBits+chunkBits) == h>>(64-tagBits) }

// index returns the table index of hash h.
func (g *Generation) index(h uint64) uint64 { return h >> g.shift }

// home returns the table index of the key slot s holds.
func (g *Generation) home(s uint64) uint64 {
	return s >> (offsetBits + chunkBits) >> (g.shift - (64 - tagBits))
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
	if len(g.slots) == 0 {
		return Claim{}, false
	}
	mask := uint64(len(g.slots) - 1)
	for i := g.index(h); ; i = (i + 1) & mask {
		s := g.slots[i]
		if s == 0 {
			return Claim{}, false
		}
		if tagIs(s, h) {
			if e := g.entry(refOf(s)); e.keyIs(key) {
				return Claim{UsageID: e.usageID, Digest: e.digest}, true
			}
		}
	}
}

// Add records that usageID (payload digest d) claimed key, whose Hash is
// h (the table reads only h, never the key's hash again: Find and Remove
// must be given the same h); key must not be claimed in g. It returns the
// claim's Ref, which Remove takes.
func (g *Generation) Add(h uint64, key []byte, usageID string, d contract.Digest) Ref {
	if (g.claims+1)*8 > len(g.slots)*maxLoad {
		g.grow()
	}
	ref := g.append(key, usageID, d)
	g.insert(slot(h, ref))
	g.claims++
	return ref
}

// insert puts s into the first empty slot of its probe sequence.
func (g *Generation) insert(s uint64) {
	mask := uint64(len(g.slots) - 1)
	i := g.home(s)
	for g.slots[i] != 0 {
		i = (i + 1) & mask
	}
	g.slots[i] = s
}

// grow doubles the table (from 1<<minTableBits slots) and places every
// slot again.
func (g *Generation) grow() {
	old := g.slots
	bits := uint(minTableBits)
	if len(old) > 0 {
		bits = 64 - g.shift + 1
	}
	if bits > tagBits {
		panic("claims: a generation holds more claims than its table can index")
	}
	g.slots, g.shift = make([]uint64, 1<<bits), 64-bits
	for _, s := range old {
		if s != 0 {
			g.insert(s)
		}
	}
}

// Remove undoes the Add of the claim at ref, whose key's Hash is h. Its
// arena bytes stay until the generation is dropped.
func (g *Generation) Remove(h uint64, ref Ref) {
	if len(g.slots) == 0 {
		return
	}
	mask := uint64(len(g.slots) - 1)
	i := g.index(h)
	for {
		s := g.slots[i]
		if s == 0 {
			return // not held
		}
		if refOf(s) == ref {
			break
		}
		i = (i + 1) & mask
	}
	// Shift back the slots after it that probed past it, so that no probe
	// sequence has a hole.
	for j := (i + 1) & mask; g.slots[j] != 0; j = (j + 1) & mask {
		home := g.home(g.slots[j])
		// The slot at j may move to i when i lies on its way from home
		// to j (cyclically).
		if (j-home)&mask >= (j-i)&mask {
			g.slots[i] = g.slots[j]
			i = j
		}
	}
	g.slots[i] = 0
	g.claims--
}

// Each calls fn for every claim g holds, in no order (the usage_id aliases
// the arena, the key a buffer reused between calls).
func (g *Generation) Each(fn func(key []byte, c Claim)) {
	var key []byte
	for _, s := range g.slots {
		if s == 0 {
			continue
		}
		e := g.entry(refOf(s))
		key = append(append(key[:0], e.prefix...), e.suffix()...)
		fn(key, Claim{UsageID: e.usageID, Digest: e.digest})
	}
}

// Claims returns the number of claims g holds.
func (g *Generation) Claims() int { return g.claims }

// An arena entry is: digest (8 bytes, little endian), usage_id length
// (uvarint), usage_id, the key's prefix, and the length of the key's
// suffix (uvarint): the key is the prefix followed by the last bytes of
// the usage_id, as many as the suffix's length (the longest end the two
// share; usually none or the metering_id). The prefix is its length
// times two (uvarint) and its bytes, or the number of a source times two
// plus one (uvarint) when it is a metering_source and its slash.

// append copies a claim into the arena and returns its ref.
func (g *Generation) append(key []byte, usageID string, d contract.Digest) Ref {
	shared := 0
	for shared < len(key) && shared < len(usageID) && key[len(key)-1-shared] == usageID[len(usageID)-1-shared] {
		shared++
	}
	prefix := key[:len(key)-shared]
	src, numbered := g.source(prefix)
	size := 8 + binary.MaxVarintLen32*3 + len(usageID) + len(prefix)
	n := len(g.chunks)
	if n == 0 || cap(g.chunks[n-1])-len(g.chunks[n-1]) < size || len(g.chunks[n-1]) >= 1<<offsetBits {
		g.chunks = append(g.chunks, make([]byte, 0, max(chunkSize, size)))
		n++
	}
	buf := g.chunks[n-1]
	off := len(buf)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(d))
	buf = binary.AppendUvarint(buf, uint64(len(usageID)))
	buf = append(buf, usageID...)
	if numbered {
		buf = binary.AppendUvarint(buf, uint64(src)<<1|1)
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(prefix))<<1)
		buf = append(buf, prefix...)
	}
	g.chunks[n-1] = binary.AppendUvarint(buf, uint64(shared))
	return Ref(uint64(n-1)<<32 | uint64(off))
}

// source returns the number of prefix in g's sources, numbering it if
// need be, when prefix is a metering_source and its slash (no other slash;
// contract.UsageKey) and the table has room.
func (g *Generation) source(prefix []byte) (uint32, bool) {
	if len(prefix) == 0 || prefix[len(prefix)-1] != '/' || bytes.IndexByte(prefix, '/') != len(prefix)-1 {
		return 0, false
	}
	if n, ok := g.sourceOf[string(prefix)]; ok {
		return n, true
	}
	if len(g.sources) == maxSources {
		return 0, false
	}
	if g.sourceOf == nil {
		g.sourceOf = map[string]uint32{}
	}
	n := uint32(len(g.sources))
	g.sources = append(g.sources, slices.Clone(prefix))
	g.sourceOf[string(prefix)] = n
	return n, true
}

// entry is an arena entry read back; its slices alias the arena.
type entry struct {
	digest  contract.Digest
	usageID []byte
	prefix  []byte
	shared  int
}

// suffix returns the end of the key that the usage_id holds.
func (e *entry) suffix() []byte { return e.usageID[len(e.usageID)-e.shared:] }

// keyIs reports whether e's key is key.
func (e *entry) keyIs(key []byte) bool {
	return len(key) == len(e.prefix)+e.shared && string(key[:len(e.prefix)]) == string(e.prefix) &&
		string(key[len(e.prefix):]) == string(e.suffix())
}

// entry reads the entry at ref.
func (g *Generation) entry(ref Ref) entry {
	b := g.chunks[ref>>32][uint32(ref):]
	e := entry{digest: contract.Digest(binary.LittleEndian.Uint64(b))}
	n, k := binary.Uvarint(b[8:])
	b = b[8+k:]
	e.usageID, b = b[:n], b[n:]
	n, k = binary.Uvarint(b)
	b = b[k:]
	if n&1 == 1 {
		e.prefix = g.sources[n>>1]
	} else {
		e.prefix, b = b[:n>>1], b[n>>1:]
	}
	s, _ := binary.Uvarint(b)
	e.shared = int(s)
	return e
}

// Bytes returns the memory the generation holds: its arena and its table.
func (g *Generation) Bytes() int {
	n := 8 * len(g.slots)
	for _, c := range g.chunks {
		n += cap(c)
	}
	return n
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
		if gs.ended(g.Start, floor) {
			continue
		}
		if c, ok := g.Find(h, key); ok {
			return c, true
		}
	}
	return Claim{}, false
}

// Gen returns the generation holding usage that occurred at at (unix
// ns), created if need be. A generation starts at a multiple of Span;
// the first one, whose multiple lies before the earliest int64, starts
// at math.MinInt64.
func (gs *Gens) Gen(at int64) *Generation {
	m := at % gs.Span
	if m < 0 {
		m += gs.Span
	}
	start := Sub(at, m)
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
	gs.List = slices.DeleteFunc(gs.List, func(g *Generation) bool { return gs.ended(g.Start, floor) })
}

// Ended reports whether the generation holding usage that occurred at at
// (unix ns) ends at or before floor: Find skips its claims and Forget
// drops it.
func (gs *Gens) Ended(at, floor int64) bool { return gs.ended(at, floor) }

// ended is Ended. It compares the numbers of the generations holding at
// and floor, not their ends: the end of a generation within Span of the
// largest int64 is beyond it, and the sum would wrap around to a
// negative time.
func (gs *Gens) ended(at, floor int64) bool { return gs.number(at) < gs.number(floor) }

// number returns the number of the generation holding time at: at
// divided by Span, rounded down. A generation numbered n ends at
// (n+1)*Span, which is at or before floor exactly when n+1 is at most
// floor's number.
func (gs *Gens) number(at int64) int64 {
	n := at / gs.Span
	if at%gs.Span < 0 {
		n--
	}
	return n
}

// Claims returns the number of claims held.
func (gs *Gens) Claims() int {
	n := 0
	for _, g := range gs.List {
		n += g.claims
	}
	return n
}

// Bytes returns the memory the claims hold.
func (gs *Gens) Bytes() int {
	n := 0
	for _, g := range gs.List {
		n += g.Bytes()
	}
	return n
}

// Floor returns the event time before which usage is late and claims are
// forgotten: watermark less horizon (unix ns), or math.MinInt64 when that
// lies before the earliest int64 (a watermark within horizon of
// contract.MinTime), where the difference would wrap around to the far
// future and make every usage late.
func Floor(watermark int64, horizon time.Duration) int64 { return Sub(watermark, int64(horizon)) }

// Sub returns a-b, saturated at math.MinInt64 and math.MaxInt64 where
// the difference of two int64 would wrap around. Event times are unix ns
// in an int64, and an event may occur at either end of it
// (contract.MinTime, contract.MaxTime).
func Sub(a, b int64) int64 {
	d := a - b
	switch {
	case b > 0 && d > a:
		return math.MinInt64
	case b < 0 && d < a:
		return math.MaxInt64
	}
	return d
}
