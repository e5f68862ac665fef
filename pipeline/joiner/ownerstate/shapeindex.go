package ownerstate

import (
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// shapeIndex finds a shape's number by its value: an open-addressing
// (linear probing) table of shape numbers, a power of two long and at
// most 3/4 full. Each slot holds the number (0: empty; shape 0 is never
// indexed) and the low half of the shape's hash, so that most mismatches
// are told without reading the shape. It replaced a Go map keyed by the
// shape struct, which hashed the struct through the generic map hash and
// held 48 bytes or more per entry, with most fleets having about one
// shape per identity.
type shapeIndex struct {
	slots []uint64 // uint32(hash)<<32 | number
	shift uint     // 64 - log2(len(slots)): a hash's top bits pick its slot
	n     int
}

// shapeKey returns the first size bytes of *s, its key: the symbols of
// the shape, without the flags derived from them.
func shapeKey[S any](s *S, size uintptr) string {
	return unsafe.String((*byte)(unsafe.Pointer(s)), size)
}

// hashShape returns the hash of *s's key.
func hashShape[S any](s *S, size uintptr) uint64 { return xxhash.Sum64String(shapeKey(s, size)) }

// findShape returns the number of the shape among shapes whose key is
// that of *s (hash h), or 0 and the slot where to add it.
func findShape[S any](x *shapeIndex, shapes *chunked[S], s *S, size uintptr, h uint64) (uint32, int) {
	if x.slots == nil {
		growShapes(x, shapes, size, 16)
	}
	key, tag, mask := shapeKey(s, size), h<<32, len(x.slots)-1
	for i := int(h >> x.shift); ; i = (i + 1) & mask {
		sl := x.slots[i]
		if sl == 0 {
			return 0, i
		}
		if n := uint32(sl); sl&^(1<<32-1) == tag && shapeKey(shapes.At(n), size) == key {
			return n, i
		}
	}
}

// addShape indexes shape number n (hash h) at slot, from findShape.
func addShape[S any](x *shapeIndex, shapes *chunked[S], size uintptr, n uint32, h uint64, slot int) {
	x.slots[slot] = h<<32 | uint64(n)
	x.n++
	if 4*x.n > 3*len(x.slots) {
		growShapes(x, shapes, size, 2*len(x.slots))
	}
}

// growShapes rebuilds the index with slots slots (rounded up to a power
// of two) from shapes[1:].
func growShapes[S any](x *shapeIndex, shapes *chunked[S], size uintptr, slots int) {
	bits := uint(4)
	for 1<<bits < slots {
		bits++
	}
	x.slots, x.shift = make([]uint64, 1<<bits), 64-bits
	mask := len(x.slots) - 1
	for n := 1; n < shapes.Len(); n++ {
		h := xxhash.Sum64String(shapeKey(shapes.At(uint32(n)), size))
		i := int(h >> x.shift)
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = h<<32 | uint64(n)
	}
}
