package reconcile

import (
	"encoding/binary"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/contract/decimal"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// The usage states of a tracker are kept without pointers, so that the
// garbage collector neither scans them nor pays a header per string:
// states live in fixed chunks of a slab (a state's address never moves),
// found by the 64-bit hash of their usage_id, and their strings (usage_id,
// metering_id, quantities, amounts) in a byte arena that is compacted
// once more than half of it is dead. A usage_id is always compared in
// full, so two usage_ids whose hashes collide are never merged (the few
// that collide go to a small map by usage_id).

// astr is a string kept by the arena, in one of three forms told by its
// top two bits:
//
//   - 00: a copy in the arena, chunk << 32 | offset of its uvarint
//     length; 0 is the empty string.
//   - 1x: a decimal packed in the reference itself (putDec): its scale in
//     bits 58-62, its coefficient in bits 0-57 (two's complement), for a
//     string that decimal.Dec prints back byte for byte.
//   - 01: the last n bytes of another string's copy (putSuffix): its
//     chunk in bits 38-61, the offset of its length in bits 18-37, n in
//     bits 0-17. It owns no bytes: the string it points into does.
type astr uint64

const (
	decTag    = 1 << 63
	suffixTag = 1 << 62
	tagMask   = decTag | suffixTag
	coefBits  = 58
)

// arena holds the strings of the usage states. Bytes once written never
// change (compaction writes new chunks), so a string returned by get may
// alias them: it keeps its chunk alive as long as it is held.
type arena struct {
	chunks [][]byte
	// size is the bytes appended since the last compaction; live the
	// bytes of the strings still referenced.
	size, live int
	// tail is the chunk being filled.
	tail int
	// When spilling (spill.go): the scratch file, the bytes and the live
	// strings of each chunk, and the numbers of chunks freed.
	sf         *spillFile
	lens       []int32
	strings    []int32
	freeChunks []int
}

// arenaChunk is the size of an arena chunk, small for the same reason
// as stateChunk; a longer string gets a chunk of its own.
var arenaChunk = 32 << 10 // a variable only for tests of spilling, which need many chunks

// put copies s into the arena.
func (a *arena) put(s string) astr {
	if s == "" {
		return 0
	}
	size := binary.MaxVarintLen64 + len(s)
	if len(a.chunks) == 0 || cap(a.chunks[a.tail])-len(a.chunks[a.tail]) < size {
		a.newTail(size)
	}
	k := a.tail
	c := a.chunks[k]
	off := len(c)
	c = binary.AppendUvarint(c, uint64(len(s)))
	c = append(c, s...)
	a.chunks[k] = c
	a.size += len(c) - off
	a.live += len(c) - off
	if a.sf != nil {
		a.lens[k] = int32(len(c))
		a.strings[k]++
		a.sf.flags[k] |= chunkUsed
	}
	return astr(uint64(k)<<32 | uint64(off))
}

// newTail starts a chunk with room for size bytes.
func (a *arena) newTail(size int) {
	c := make([]byte, 0, max(arenaChunk, size+1))
	k := len(a.chunks)
	if n := len(a.freeChunks); n > 0 {
		k, a.freeChunks = a.freeChunks[n-1], a.freeChunks[:n-1]
	} else {
		a.chunks = append(a.chunks, nil)
	}
	if k == 0 {
		c = append(c, 0) // offset 0 of chunk 0 is the empty string
	}
	a.chunks[k] = c
	old := a.tail
	a.tail = k
	if a.sf == nil {
		return
	}
	for len(a.lens) <= k {
		a.lens, a.strings = append(a.lens, 0), append(a.strings, 0)
	}
	a.sf.grow(int32(k))
	a.lens[k], a.strings[k] = int32(len(c)), 0
	a.sf.flags[k] = chunkInMem | chunkUsed
	a.sf.pg.add(a, int32(k), int64(cap(c)))
	if old != k && a.strings[old] == 0 {
		a.release(int32(old)) // every string of the old tail died while it was filled
	}
}

// putDec keeps s, packed in the reference when it is a decimal that
// prints back as s (quantities and amounts), else as put does.
func (a *arena) putDec(s string) astr {
	d, err := decimal.Parse(s)
	if err != nil || d.Coef() >= 1<<(coefBits-1) || d.Coef() < -(1<<(coefBits-1)) {
		return a.put(s)
	}
	var buf [24]byte
	if string(d.Append(buf[:0])) != s {
		return a.put(s) // "01", "-0": not what the decimal prints
	}
	return astr(decTag | uint64(d.Scale())<<coefBits | uint64(d.Coef())&(1<<coefBits-1))
}

// putSuffix keeps s, the end of the string that parent holds when it is
// (as a metering_id ends the usage_id that embeds it), as a reference
// into parent's bytes; else as put does.
func (a *arena) putSuffix(parent astr, s string) astr {
	if s == "" || parent == 0 || parent&tagMask != 0 || len(s) >= 1<<18 || uint64(parent)>>32 >= 1<<24 || uint32(parent) >= 1<<20 {
		return a.put(s)
	}
	if p := a.get(parent); len(s) > len(p) || p[len(p)-len(s):] != s {
		return a.put(s)
	}
	return astr(suffixTag | uint64(parent)>>32<<38 | uint64(uint32(parent))<<18 | uint64(len(s)))
}

// dec returns the decimal r holds when it was packed by putDec.
func (r astr) dec() (decimal.Dec, bool) {
	if r&decTag == 0 {
		return decimal.Dec{}, false
	}
	coef := int64(uint64(r)<<(64-coefBits)) >> (64 - coefBits)
	return decimal.New(coef, int(r>>coefBits&31)), true
}

// owned reports whether r is a copy in the arena (free and compaction
// deal with it; the other forms own no bytes).
func (r astr) owned() bool { return r != 0 && r&tagMask == 0 }

// get returns the string at r, aliasing the arena (a packed decimal is
// printed anew).
func (a *arena) get(r astr) string {
	switch {
	case r == 0:
		return ""
	case r&decTag != 0:
		d, _ := r.dec()
		return d.String()
	case r&suffixTag != 0:
		n := int(r & (1<<18 - 1))
		p := a.get(astr((uint64(r) >> 38 & (1<<24 - 1) << 32) | (uint64(r) >> 18 & (1<<20 - 1))))
		return p[len(p)-n:]
	}
	c := a.chunks[r>>32]
	if a.sf != nil {
		c = a.use(int32(r >> 32))
	}
	c = c[uint32(r):]
	n, k := binary.Uvarint(c)
	b := c[k : k+int(n)]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// use returns chunk k of a spilling arena, read back if need be, and
// marks it used.
func (a *arena) use(k int32) []byte {
	c := a.chunks[k]
	if c == nil {
		c = a.load(k)
	}
	a.sf.flags[k] |= chunkUsed
	return c
}

// free marks the string at r dead.
func (a *arena) free(r astr) {
	if a.sf != nil {
		if k := int32(r >> 32); r.owned() {
			if a.strings[k]--; a.strings[k] == 0 && int(k) != a.tail {
				a.release(k)
			}
		}
		return
	}
	if r.owned() {
		n := len(a.get(r))
		a.live -= n + snap.UvarintLen(uint64(n))
	}
}

// setDec replaces the string at *r by s, as putDec keeps it.
func (a *arena) setDec(r *astr, s string) {
	a.free(*r)
	*r = a.putDec(s)
}

// setSuffix replaces the string at *r by s, as putSuffix keeps it.
func (a *arena) setSuffix(r *astr, parent astr, s string) {
	a.free(*r)
	*r = a.putSuffix(parent, s)
}

// wasteful reports whether compaction would free more than half of the
// arena (and at least a few chunks).
func (a *arena) wasteful() bool { return a.sf == nil && a.size > 2*a.live+4*arenaChunk }

// stateChunk is the number of states of a slab chunk: small, since a
// spilling slab reads a whole chunk back for one state (spill.go).
const stateChunk = 128

// slot numbers a state in the slab; a state's gen counts the usage_ids
// that held its slot, so that a stateRef of a dropped state is told from
// the slot's next one.
type slot = uint32

// stateRef names one usage state for the heaps and lists that outlive it
// (deadlines, lingering usage): get returns nil once it
// is dropped.
type stateRef struct {
	slot slot
	gen  uint32
}

// table is an open-addressing hash table of slots (linear probing, 8
// bytes an entry, at most 3/4 full), indexed by the top bits of a 64-bit
// hash. It keeps no keys, but an entry keeps the top tagBits of its hash
// beside its slot: the table grows and shifts entries back without
// asking for a hash again, and a lookup compares (and so reads) only the
// states whose tag matches, which may be in the spill file (spill.go).
type table struct {
	slots []uint64 // tag << slotBits | slot + 1; 0 is empty
	shift uint     // 64 - log2(len(slots))
	n     int
}

// An entry holds the slot plus one in its low slotBits, the top tagBits
// of the hash above them; a table indexes by at most tagBits bits.
const (
	slotBits = 28
	tagBits  = 64 - slotBits
	maxSlots = 1<<slotBits - 1
)

// entry returns the entry of slot i under hash h.
func entry(h uint64, i slot) uint64 { return h>>slotBits<<slotBits | uint64(i) + 1 }

// find returns the first slot on h's probe sequence for which eq holds.
func (tb *table) find(h uint64, eq func(slot) bool) (slot, bool) {
	if tb.n == 0 {
		return 0, false
	}
	m := uint64(len(tb.slots) - 1)
	for i := h >> tb.shift; ; i = (i + 1) & m {
		v := tb.slots[i]
		if v == 0 {
			return 0, false
		}
		if s := slot(v&(1<<slotBits-1) - 1); v>>slotBits == h>>slotBits && eq(s) {
			return s, true
		}
	}
}

// insert adds slot i under hash h.
func (tb *table) insert(h uint64, i slot) {
	if (tb.n+1)*4 > len(tb.slots)*3 {
		old := tb.slots
		bits := uint(10)
		if len(old) > 0 {
			bits = 64 - tb.shift + 1
		}
		if bits > tagBits {
			panic("billing: a table of usage states is full")
		}
		tb.slots, tb.shift = make([]uint64, 1<<bits), 64-bits
		for _, v := range old {
			if v != 0 {
				tb.place(v)
			}
		}
	}
	tb.place(entry(h, i))
	tb.n++
}

func (tb *table) place(v uint64) {
	m := uint64(len(tb.slots) - 1)
	j := v >> tb.shift
	for tb.slots[j] != 0 {
		j = (j + 1) & m
	}
	tb.slots[j] = v
}

// remove deletes slot i, held under hash h, and moves back the entries
// after it that would no longer be found.
func (tb *table) remove(h uint64, i slot) {
	m := uint64(len(tb.slots) - 1)
	e := entry(h, i)
	at := h >> tb.shift
	for tb.slots[at] != e {
		if tb.slots[at] == 0 {
			panic("BUG: billing: removing a slot its table does not hold")
		}
		at = (at + 1) & m
	}
	for j := (at + 1) & m; tb.slots[j] != 0; j = (j + 1) & m {
		home := tb.slots[j] >> tb.shift
		// The entry at j stays when its home lies cyclically in (at, j].
		if (at < j && at < home && home <= j) || (at > j && (at < home || home <= j)) {
			continue
		}
		tb.slots[at] = tb.slots[j]
		at = j
	}
	tb.slots[at] = 0
	tb.n--
}

// slab holds the usage states.
type slab struct {
	chunks [][]usageState // a chunk on file is nil (spill.go)
	// sf is the scratch file when spilling; spare the memory of chunks
	// written to it, for the next ones read back or added.
	sf    *spillFile
	spare [][]usageState
	free  []slot
	n     int // states in use
	// conflicts holds the conflictQuantity of the few states that have
	// one: the quantity of the latest usage that came under the same
	// usage_id with another content.
	conflicts map[slot]astr
	// ids finds a state by the hash of its usage_id.
	ids table
}

func newSlab() slab { return slab{conflicts: map[slot]astr{}} }

// conflictQuantity returns the conflicting quantity of s (slab.conflicts).
func (sl *slab) conflictQuantity(s *usageState) astr { return sl.conflicts[s.slot] }

// setConflictQuantity replaces the conflicting quantity of s by q.
func (sl *slab) setConflictQuantity(a *arena, s *usageState, q string) {
	r := sl.conflicts[s.slot]
	a.setDec(&r, q)
	sl.conflicts[s.slot] = r
}

// at returns the state in slot i.
func (sl *slab) at(i slot) *usageState {
	k := i / stateChunk
	if sl.sf != nil {
		sl.use(int32(k))
	}
	return &sl.chunks[k][i%stateChunk]
}

// get returns the state r names, nil if it was dropped.
func (sl *slab) get(r stateRef) *usageState {
	if s := sl.at(r.slot); s.gen == r.gen && s.is(inUse) {
		return s
	}
	return nil
}

// find returns the state of usageID, nil if none; a holds the usage_ids.
func (sl *slab) find(a *arena, usageID string) *usageState {
	i, ok := sl.ids.find(xxhash.Sum64String(usageID), func(i slot) bool { return a.get(sl.at(i).id) == usageID })
	if !ok {
		return nil
	}
	return sl.at(i)
}

// add returns a new state for usageID, which has none.
func (sl *slab) add(a *arena, usageID string) *usageState {
	var i slot
	if n := len(sl.free); n > 0 {
		i, sl.free = sl.free[n-1], sl.free[:n-1]
	} else {
		i = slot(len(sl.chunks) * stateChunk)
		if i+stateChunk > maxSlots {
			panic("billing: more usage states in one partition than a table can hold")
		}
		if sl.sf == nil {
			sl.chunks = append(sl.chunks, make([]usageState, stateChunk))
		} else {
			c := sl.chunk()
			clear(c)
			sl.chunks = append(sl.chunks, c)
			k := int32(len(sl.chunks) - 1)
			sl.sf.grow(k)
			sl.sf.flags[k] = chunkInMem | chunkUsed | chunkDirty
			sl.sf.pg.add(sl, k, stateBytes)
		}
		for j := stateChunk - 1; j > 0; j-- {
			sl.free = append(sl.free, i+slot(j))
		}
	}
	s := sl.at(i)
	*s = usageState{slot: i, gen: s.gen + 1, flags: inUse, id: a.put(usageID)}
	sl.ids.insert(xxhash.Sum64String(usageID), i)
	sl.n++
	return s
}

// remove drops state s and frees its strings.
func (sl *slab) remove(a *arena, s *usageState) {
	sl.ids.remove(xxhash.Sum64String(a.get(s.id)), s.slot)
	for _, r := range s.strs() {
		a.free(*r)
	}
	if q, ok := sl.conflicts[s.slot]; ok {
		a.free(q)
		delete(sl.conflicts, s.slot)
	}
	*s = usageState{slot: s.slot, gen: s.gen}
	sl.free = append(sl.free, s.slot)
	sl.n--
}

// each calls fn for every state in use. When spilling, a chunk it reads
// back for itself goes back to the file once passed (a pass over the slab
// does not push out the chunks in use), and the strings fn read are let
// go as the arenas' budget needs.
func (sl *slab) each(fn func(*usageState)) {
	for k := range sl.chunks {
		mine := false
		if sl.sf != nil {
			f := &sl.sf.flags[k]
			if mine = *f&chunkInMem == 0; mine {
				sl.use(int32(k))
				*f &^= chunkUsed
			}
			*f |= chunkDirty
		}
		c := sl.chunks[k]
		for i := range c {
			if c[i].is(inUse) {
				fn(&c[i])
			}
		}
		if mine {
			sl.leave(int32(k))
		}
		if sl.sf != nil {
			sl.sf.pg.trim(false)
		}
	}
}

// compact copies the live strings into a new arena when the old one is
// mostly dead. Strings already handed out keep the old chunks alive until
// they are dropped.
func (sl *slab) compact(a *arena) {
	if !a.wasteful() {
		return
	}
	var b arena
	sl.each(func(s *usageState) {
		for _, r := range s.strs() {
			switch {
			case r.owned():
				*r = b.put(a.get(*r))
			case *r&suffixTag != 0 && *r&decTag == 0:
				// Every suffix points into its state's usage_id, copied
				// first (strs).
				*r = b.putSuffix(s.id, a.get(*r))
			}
		}
	})
	for i, q := range sl.conflicts {
		if q.owned() {
			sl.conflicts[i] = b.put(a.get(q))
		}
	}
	*a = b
}
