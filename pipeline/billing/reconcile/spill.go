package reconcile

import (
	"fmt"
	"os"
	"unsafe"
)

// Spilling: a reconciler catching up after a rater outage holds every
// usage_id of its partitions within the horizon, none of them settled,
// and their states and strings are most of its memory (120 bytes a state
// and about 35 of strings). With Options.StateMemory set, the chunks of
// the slabs (128 states, 15 KiB) and of the arenas (32 KiB of strings) of all
// its trackers share that budget: the chunks used least recently beyond
// it are written to a scratch file per slab and arena and read back when
// a state or string in them is used. What stays in memory per usage_id is
// its two table entries (8 bytes each, in tables between 3/8 and 3/4
// full) and its pending deadlines (16 bytes each). The files are unlinked as soon as they are created, so
// nothing is left behind by a crash; a restart rebuilds the state by
// replay (restore.go), as without spilling.
//
// When chunks go to the file:
//
//   - a slab chunk only at a safe point (pager.trim, between two records
//     the reconciler applies), since the tracker holds *usageState
//     pointers within a call; the chunks one pass over the slab loads
//     (slab.each) are written back as the pass leaves them;
//   - an arena chunk at any trim: its bytes never change once it is
//     full, so a string still held keeps its old buffer alive, and the
//     chunk is read anew when used again.
//
// Which: a clock over the chunks in memory, one for those of states and
// one for those of strings, taken in turn (a chunk used since the hand
// last passed it gets another turn). A chunk comes back with one read of
// its size; the page cache of the kernel usually holds it, so a read
// costs a copy, not the disk.
type pager struct {
	budget   int64 // bytes of chunks kept in memory
	resident int64 // bytes of chunks in memory
	dir      string
	// The chunks in memory, in two clocks: those of states (which go
	// only at a safe point) and those of strings.
	states, strings clock
	// Chunks read back and written (for the metrics), and chunks of
	// strings freed whole.
	reads, writes, freed int64
}

// clock is the ring of chunks in memory of one kind and its hand.
type clock struct {
	ring []page
	hand int
}

// page is one chunk of a slab or arena in memory.
type page struct {
	set pageSet
	k   int32
}

// pageSet is a slab or arena whose chunks the pager keeps.
type pageSet interface {
	// file returns the set's scratch file, which keeps the flags and
	// ring positions of its chunks.
	file() *spillFile
	// evict writes chunk k to the file if need be and lets its memory
	// go, returning the bytes it freed; 0 when k must stay.
	evict(k int32) int64
	// sizeOf returns the bytes chunk k takes in memory.
	sizeOf(k int32) int64
}

func newPager(budget int64, dir string) *pager {
	if dir == "" {
		dir = os.TempDir()
	}
	return &pager{budget: budget, dir: dir}
}

// check creates and removes a file in the pager's directory: a directory
// that cannot hold the scratch files fails the start, not a later round.
func (p *pager) check() error {
	f, err := os.CreateTemp(p.dir, "driftline-billing-check-*")
	if err != nil {
		return fmt.Errorf("billing: -billing.spillDir: %w", err)
	}
	_ = f.Close()
	return os.Remove(f.Name())
}

// add puts chunk k of set, now in memory with size bytes, in its clock.
func (p *pager) add(set pageSet, k int32, size int64) {
	c := set.file().clock
	set.file().ring[k] = int32(len(c.ring))
	c.ring = append(c.ring, page{set, k})
	p.resident += size
}

// drop takes the chunk at position at of set's clock out of it, freed
// bytes less in memory.
func (p *pager) drop(set pageSet, at int, freed int64) {
	c := set.file().clock
	last := len(c.ring) - 1
	c.ring[at].set.file().ring[c.ring[at].k] = -1
	if at != last {
		c.ring[at] = c.ring[last]
		c.ring[at].set.file().ring[c.ring[at].k] = int32(at)
	}
	c.ring[last] = page{}
	c.ring = c.ring[:last]
	p.resident -= freed
}

// over reports whether the chunks in memory exceed the budget.
func (p *pager) over() bool { return p != nil && p.resident > p.budget }

// trim lets chunks go, least recently used first, until those in memory
// fit the budget: of states and strings in turn when states is true (a
// safe point: no *usageState is held), else of strings only.
func (p *pager) trim(states bool) {
	if !p.over() {
		return
	}
	// Two turns of a clock clear every use bit; a third finds nothing
	// left to let go but chunks that must stay.
	turns := 3 * len(p.strings.ring)
	if states {
		turns = 6 * max(len(p.states.ring), len(p.strings.ring))
	}
	for i := 0; p.over() && i < turns; i++ {
		c := &p.strings
		if states && i%2 == 0 {
			c = &p.states
		}
		if len(c.ring) == 0 {
			continue
		}
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		pg := c.ring[c.hand]
		if pg.set.file().used(pg.k) {
			c.hand++
			continue
		}
		if freed := pg.set.evict(pg.k); freed > 0 {
			p.drop(pg.set, c.hand, freed)
			continue
		}
		c.hand++
	}
}

// forget takes every chunk of set out of its clock: its tracker is gone.
func (p *pager) forget(set pageSet) {
	c := set.file().clock
	for i := 0; i < len(c.ring); {
		if c.ring[i].set == set {
			p.drop(set, i, set.sizeOf(c.ring[i].k))
			continue
		}
		i++
	}
}

// spillFile is the scratch file of one slab or arena, with what the pager
// needs per chunk: its place in the ring (-1 when on file or never
// written) and flags.
type spillFile struct {
	pg    *pager
	clock *clock // the pager's clock of the file's chunks
	f     *os.File
	ring  []int32
	flags []uint8
}

// Chunk flags of a spillFile.
const (
	chunkUsed   = 1 << iota // used since the clock's hand last passed it
	chunkDirty              // changed since it was last written (slab)
	chunkOnFile             // the file holds its bytes
	chunkInMem              // in memory (ring holds where it is)
)

func newSpillFile(pg *pager, c *clock, what string) *spillFile {
	f, err := os.CreateTemp(pg.dir, "driftline-billing-"+what+"-*")
	if err != nil {
		panic(fmt.Errorf("billing: state spill file: %w", err))
	}
	// Unlinked at once: the open file stays until the tracker is closed
	// or the process ends, crash included.
	_ = os.Remove(f.Name())
	return &spillFile{pg: pg, clock: c, f: f}
}

// grow makes room for the flags of chunk k.
func (sf *spillFile) grow(k int32) {
	for int(k) >= len(sf.ring) {
		sf.ring = append(sf.ring, -1)
		sf.flags = append(sf.flags, 0)
	}
}

// used reports whether chunk k was used since the clock's hand last
// passed it, and clears that.
func (sf *spillFile) used(k int32) bool {
	u := sf.flags[k]&chunkUsed != 0
	sf.flags[k] &^= chunkUsed
	return u
}

func (sf *spillFile) write(b []byte, off int64) {
	if _, err := sf.f.WriteAt(b, off); err != nil {
		panic(fmt.Errorf("billing: state spill file: %w", err))
	}
	sf.pg.writes++
}

func (sf *spillFile) read(b []byte, off int64) {
	if _, err := sf.f.ReadAt(b, off); err != nil {
		panic(fmt.Errorf("billing: state spill file: %w", err))
	}
	sf.pg.reads++
}

// close takes set's chunks out of the ring and closes the file, which
// frees its space.
func (sf *spillFile) close(set pageSet) {
	if sf != nil {
		sf.pg.forget(set)
		_ = sf.f.Close()
	}
}

// stateBytes is the size of a slab chunk.
const stateBytes = int64(stateChunk * unsafe.Sizeof(usageState{}))

// bytesOf returns the memory of slab chunk c as bytes (usageState holds
// no pointer).
func bytesOf(c []usageState) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c))), stateBytes)
}

// spill lets slab sl, still empty, keep its chunks within pg's budget.
func (sl *slab) spill(pg *pager) {
	if len(sl.chunks) > 0 {
		panic("BUG: billing: spilling a slab that holds states")
	}
	sl.sf = newSpillFile(pg, &pg.states, "states")
}

// use marks chunk k used and changed, reading it back first if it is on
// file.
func (sl *slab) use(k int32) {
	f := &sl.sf.flags[k]
	if *f&chunkInMem == 0 {
		c := sl.chunk()
		sl.sf.read(bytesOf(c), int64(k)*stateBytes)
		sl.chunks[k] = c
		sl.sf.pg.add(sl, k, stateBytes)
		*f |= chunkInMem
	}
	*f |= chunkUsed | chunkDirty
}

func (sl *slab) file() *spillFile { return sl.sf }

func (sl *slab) sizeOf(int32) int64 { return stateBytes }

func (sl *slab) evict(k int32) int64 {
	f := &sl.sf.flags[k]
	c := sl.chunks[k]
	if *f&chunkDirty != 0 {
		sl.sf.write(bytesOf(c), int64(k)*stateBytes)
	}
	*f = chunkOnFile
	sl.chunks[k] = nil
	if len(sl.spare) < maxSpare {
		sl.spare = append(sl.spare, c) // no state points into it now
	}
	return stateBytes
}

// maxSpare bounds the chunks' memory a slab keeps for reuse: one
// trim lets a chunk or two go for each one a record reads back or adds.
const maxSpare = 4

// chunk returns the memory of a chunk, written out before if there is
// such, else new.
func (sl *slab) chunk() []usageState {
	if n := len(sl.spare); n > 0 {
		c := sl.spare[n-1]
		sl.spare[n-1] = nil
		sl.spare = sl.spare[:n-1]
		return c
	}
	return make([]usageState, stateChunk)
}

// leave lets chunk k go after a pass over the slab read it back for
// itself alone (each).
func (sl *slab) leave(k int32) {
	if at := sl.sf.ring[k]; at >= 0 {
		sl.sf.pg.drop(sl, int(at), sl.evict(k))
	}
}

// spill lets arena a, still empty, keep its chunks within pg's budget. A
// spilling arena is never compacted (that would read every string back);
// it frees a chunk once no string in it is live (arena.free), and numbers
// the next chunk with it.
func (a *arena) spill(pg *pager) {
	if len(a.chunks) > 0 {
		panic("BUG: billing: spilling an arena that holds strings")
	}
	a.sf = newSpillFile(pg, &pg.strings, "strings")
}

// load reads chunk k back from the file.
func (a *arena) load(k int32) []byte {
	c := make([]byte, a.lens[k])
	a.sf.read(c, int64(k)*int64(arenaChunk))
	a.chunks[k] = c
	a.sf.flags[k] |= chunkInMem
	a.sf.pg.add(a, k, int64(cap(c)))
	return c
}

func (a *arena) file() *spillFile { return a.sf }

func (a *arena) sizeOf(k int32) int64 { return int64(cap(a.chunks[k])) }

func (a *arena) evict(k int32) int64 {
	c := a.chunks[k]
	if int(k) == a.tail || cap(c) > arenaChunk {
		return 0 // being filled, or a string of its own larger than a chunk's place in the file
	}
	f := &a.sf.flags[k]
	if *f&chunkOnFile == 0 {
		a.sf.write(c, int64(k)*int64(arenaChunk))
	}
	*f = chunkOnFile
	a.chunks[k] = nil // a string still held keeps c
	return int64(cap(c))
}

// release frees chunk k, whose strings are all dead: its number goes to
// the next new chunk.
func (a *arena) release(k int32) {
	if at := a.sf.ring[k]; at >= 0 {
		a.sf.pg.drop(a, int(at), int64(cap(a.chunks[k])))
	}
	a.chunks[k] = nil
	a.sf.flags[k] = 0
	a.lens[k] = 0
	a.freeChunks = append(a.freeChunks, int(k))
	a.sf.pg.freed++
}
