package reconcile

import (
	"encoding/binary"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// The usage states of a tracker are kept without pointers, so that the
// garbage collector neither scans them nor pays a header per string:
// states live in fixed chunks of a slab (a state's address never moves),
// found by the 64-bit hash of their usage_id, and their strings (usage_id,
// metering_id, quantities, amounts) in a byte arena that is compacted
// once more than half of it is dead. A usage_id is always compared in
// full, so two usage_ids whose hashes collide are never merged (the few
// that collide go to a small map by usage_id).

// astr is a string kept in the arena: chunk << 32 | offset of its uvarint
// length. 0 is the empty string.
type astr uint64

// arena holds the strings of the usage states. Bytes once written never
// change (compaction writes new chunks), so a string returned by get may
// alias them: it keeps its chunk alive as long as it is held.
type arena struct {
	chunks [][]byte
	// size is the bytes appended since the last compaction; live the
	// bytes of the strings still referenced.
	size, live int
}

// arenaChunk is the size of an arena chunk; a longer string gets a chunk
// of its own.
const arenaChunk = 1 << 20

// put copies s into the arena.
func (a *arena) put(s string) astr {
	if s == "" {
		return 0
	}
	size := binary.MaxVarintLen64 + len(s)
	n := len(a.chunks)
	if n == 0 || cap(a.chunks[n-1])-len(a.chunks[n-1]) < size {
		c := make([]byte, 0, max(arenaChunk, size+1))
		if n == 0 {
			c = append(c, 0) // offset 0 of chunk 0 is the empty string
		}
		a.chunks = append(a.chunks, c)
		n++
	}
	c := a.chunks[n-1]
	off := len(c)
	c = binary.AppendUvarint(c, uint64(len(s)))
	c = append(c, s...)
	a.chunks[n-1] = c
	a.size += len(c) - off
	a.live += len(c) - off
	return astr(uint64(n-1)<<32 | uint64(off))
}

// get returns the string at r, aliasing the arena.
func (a *arena) get(r astr) string {
	if r == 0 {
		return ""
	}
	c := a.chunks[r>>32][uint32(r):]
	n, k := binary.Uvarint(c)
	b := c[k : k+int(n)]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// free marks the string at r dead.
func (a *arena) free(r astr) {
	if r != 0 {
		n := len(a.get(r))
		a.live -= n + uvarintLen(n)
	}
}

// set replaces the string at *r by s.
func (a *arena) set(r *astr, s string) {
	a.free(*r)
	*r = a.put(s)
}

// wasteful reports whether compaction would free more than half of the
// arena (and at least a few chunks).
func (a *arena) wasteful() bool { return a.size > 2*a.live+4*arenaChunk }

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// stateChunk is the number of states of a slab chunk.
const stateChunk = 4096

// slot numbers a state in the slab; a state's gen counts the usage_ids
// that held its slot, so that a stateRef of a dropped state is told from
// the slot's next one.
type slot = uint32

// stateRef names one usage state for the heaps and lists that outlive it
// (deadlines, windows to sweep, lingering usage): get returns nil once it
// is dropped.
type stateRef struct {
	slot slot
	gen  uint32
}

// slab holds the usage states.
type slab struct {
	chunks [][]usageState
	free   []slot
	n      int // states in use
	// index maps the hash of a usage_id to its state's slot; collide the
	// usage_ids whose hash another usage_id held when they were added.
	index   map[uint64]slot
	collide map[string]slot
}

func newSlab() slab { return slab{index: map[uint64]slot{}} }

// at returns the state in slot i.
func (sl *slab) at(i slot) *usageState { return &sl.chunks[i/stateChunk][i%stateChunk] }

// get returns the state r names, nil if it was dropped.
func (sl *slab) get(r stateRef) *usageState {
	if s := sl.at(r.slot); s.gen == r.gen && s.inUse {
		return s
	}
	return nil
}

// find returns the state of usageID, nil if none; a holds the usage_ids.
func (sl *slab) find(a *arena, usageID string) *usageState {
	if i, ok := sl.index[xxhash.Sum64String(usageID)]; ok {
		if s := sl.at(i); a.get(s.id) == usageID {
			return s
		}
	}
	if len(sl.collide) > 0 {
		if i, ok := sl.collide[usageID]; ok {
			return sl.at(i)
		}
	}
	return nil
}

// add returns a new state for usageID, which has none.
func (sl *slab) add(a *arena, usageID string) *usageState {
	var i slot
	if n := len(sl.free); n > 0 {
		i, sl.free = sl.free[n-1], sl.free[:n-1]
	} else {
		i = slot(len(sl.chunks) * stateChunk)
		sl.chunks = append(sl.chunks, make([]usageState, stateChunk))
		for j := stateChunk - 1; j > 0; j-- {
			sl.free = append(sl.free, i+slot(j))
		}
	}
	s := sl.at(i)
	*s = usageState{slot: i, gen: s.gen + 1, inUse: true, id: a.put(usageID)}
	h := xxhash.Sum64String(usageID)
	if _, taken := sl.index[h]; taken {
		if sl.collide == nil {
			sl.collide = map[string]slot{}
		}
		sl.collide[a.get(s.id)] = i
	} else {
		sl.index[h] = i
	}
	sl.n++
	return s
}

// remove drops state s and frees its strings.
func (sl *slab) remove(a *arena, s *usageState) {
	id := a.get(s.id)
	h := xxhash.Sum64String(id)
	if i, ok := sl.index[h]; ok && i == s.slot {
		delete(sl.index, h)
	} else {
		delete(sl.collide, id)
	}
	for _, r := range s.strs() {
		a.free(*r)
	}
	*s = usageState{slot: s.slot, gen: s.gen}
	sl.free = append(sl.free, s.slot)
	sl.n--
}

// each calls fn for every state in use.
func (sl *slab) each(fn func(*usageState)) {
	for _, c := range sl.chunks {
		for i := range c {
			if c[i].inUse {
				fn(&c[i])
			}
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
			*r = b.put(a.get(*r))
		}
	})
	*a = b
}
