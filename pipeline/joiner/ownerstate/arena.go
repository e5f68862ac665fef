package ownerstate

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/driftline/driftline/pipeline/stream/snap"
)

// The identity keys and record ids live in an arena: chunks of bytes with
// no pointers, written once and never changed, so a string read from one
// (unsafe.String) stays valid as long as it is referenced, and keeps its
// chunk alive, whatever the store does later. An identity holds a 32-bit
// reference (chunk<<arenaChunkBits | offset) and the key's length instead
// of a string header and an allocation of its own.
const (
	arenaChunkBits = 16
	arenaChunk     = 1 << arenaChunkBits // bytes of a full chunk
	arenaFirst     = 1 << 10             // bytes of the first chunk; chunks double up to arenaChunk
	maxArenaChunks = 1 << (32 - arenaChunkBits)

	// MaxKeyLen and MaxRecordIDLen bound an identity key and a record id.
	// An event is at most contract.MaxEventLen (64 KiB) bytes of JSON, so no
	// valid event carries a longer one; the store panics rather than
	// truncate one that is longer.
	MaxKeyLen      = 1<<16 - 1
	MaxRecordIDLen = 1<<16 - 1
)

// arena is a store's key arena. An entry is the identity key, the length
// of the record id (uvarint) and the record id; the identity keeps the
// key's length. A record id that changes appends a new entry, and the old
// one is garbage until Store.Maintain rewrites the arena.
type arena struct {
	chunks  [][]byte
	live    int // bytes of the entries the identities refer to
	garbage int // bytes of entries no identity refers to any more
}

// alloc returns the reference of n new bytes and the bytes to fill. An
// entry never spans two chunks: a longer one than arenaChunk gets a chunk
// of its own (at offset 0, so its reference is still exact).
func (a *arena) alloc(n int) (uint32, []byte) {
	if n == 0 {
		return 0, nil
	}
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+n > cap(a.chunks[last]) {
		size := arenaFirst
		if last >= 0 {
			size = min(2*cap(a.chunks[last]), arenaChunk)
		}
		for size < n && size < arenaChunk {
			size *= 2
		}
		size = max(size, n)
		if len(a.chunks) == maxArenaChunks {
			panic(fmt.Sprintf("ownerstate: key arena full (%d chunks)", maxArenaChunks))
		}
		a.chunks = append(a.chunks, make([]byte, 0, size))
		last++
	}
	c := a.chunks[last]
	off := len(c)
	a.chunks[last] = c[:off+n]
	a.live += n
	return uint32(last)<<arenaChunkBits | uint32(off), c[off : off+n : off+n]
}

// put appends the entry of key and rid and returns its reference.
func (a *arena) put(key, rid string) uint32 { return put(a, key, rid) }

func put[T string | []byte](a *arena, key, rid T) uint32 {
	ref, b := a.alloc(len(key) + snap.UvarintLen(uint64(len(rid))) + len(rid))
	n := copy(b, key)
	n += binary.PutUvarint(b[n:], uint64(len(rid)))
	copy(b[n:], rid)
	return ref
}

// bytes returns the n bytes at ref (aliasing the chunk).
func (a *arena) bytes(ref uint32, n int) []byte {
	c := a.chunks[ref>>arenaChunkBits]
	off := int(ref & (arenaChunk - 1))
	return c[off : off+n : off+n]
}

// rid returns the record id of the entry at ref whose key is klen bytes,
// and the length of the entry.
func (a *arena) rid(ref uint32, klen int) (rid string, size int) {
	c := a.chunks[ref>>arenaChunkBits]
	off := int(ref&(arenaChunk-1)) + klen
	n, l := uint64(c[off]), 1
	if n >= 0x80 {
		n, l = binary.Uvarint(c[off:])
	}
	if n == 0 {
		return "", klen + 1
	}
	return unsafe.String(&c[off+l : off+l+int(n)][0], int(n)), klen + l + int(n)
}

// extend grows the n-byte entry at ref by m bytes in place and returns
// them, if the entry is the last of the last chunk and the chunk has room
// (no byte already written changes); nil otherwise.
func (a *arena) extend(ref uint32, n, m int) []byte {
	last := len(a.chunks) - 1
	if last < 0 || int(ref>>arenaChunkBits) != last {
		return nil
	}
	c := a.chunks[last]
	end := int(ref&(arenaChunk-1)) + n
	if end != len(c) || end+m > cap(c) {
		return nil
	}
	a.chunks[last] = c[:end+m]
	a.live += m
	return c[end : end+m : end+m]
}

// free counts the n bytes of an entry as garbage.
func (a *arena) free(n int) {
	a.live -= n
	a.garbage += n
}

// str returns the n bytes at ref as a string. The bytes are never written
// again (see arena).
func (a *arena) str(ref uint32, n int) string {
	if n == 0 {
		return ""
	}
	c := a.chunks[ref>>arenaChunkBits]
	off := int(ref & (arenaChunk - 1))
	return unsafe.String(&c[off : off+n][0], n)
}

// minArenaCompact is the garbage (bytes) below which the arena is never
// rewritten.
const minArenaCompact = 1 << 20

// due reports whether the garbage outweighs the live entries (and is not
// trivially small): rewriting then at least halves the arena.
func (a *arena) due() bool { return a.garbage > minArenaCompact && a.garbage > a.live }
