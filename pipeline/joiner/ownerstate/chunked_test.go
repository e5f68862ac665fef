package ownerstate

import (
	"fmt"
	"testing"
	"unsafe"
)

// TestChunked checks indexes and values across chunk boundaries, that an
// element does not move once the first chunk is full, and Grow.
func TestChunked(t *testing.T) {
	var c chunked[uint64]
	const n = 3*chunkSize + 5
	var first *uint64
	for i := range n {
		if got := c.Append(uint64(i) * 7); got != uint32(i) {
			t.Fatalf("Append %d returned index %d", i, got)
		}
		if i == chunkSize {
			first = c.At(0)
		}
	}
	if c.Len() != n {
		t.Fatalf("Len %d, want %d", c.Len(), n)
	}
	for i := range n {
		if v := *c.At(uint32(i)); v != uint64(i)*7 {
			t.Fatalf("At(%d) = %d, want %d", i, v, uint64(i)*7)
		}
	}
	if first != c.At(0) {
		t.Fatal("element 0 moved after the first chunk was full")
	}
	for k, ch := range c.chunks[:len(c.chunks)-1] {
		if len(ch) != chunkSize {
			t.Fatalf("chunk %d holds %d elements, want %d", k, len(ch), chunkSize)
		}
	}

	var g chunked[uint64]
	g.Grow(100)
	p := g.At(g.Append(1))
	for i := 1; i < 100; i++ {
		g.Append(uint64(i))
	}
	if p != g.At(0) || cap(g.chunks[0]) < 100 {
		t.Fatalf("Grow(100): the first chunk moved or holds %d", cap(g.chunks[0]))
	}
}

// TestIdentityLines checks that every identity of a chunk is one cache
// line: 64 bytes, at a 64-byte boundary.
func TestIdentityLines(t *testing.T) {
	if n := unsafe.Sizeof(Identity{}); n != 64 {
		t.Fatalf("an identity is %d bytes, want 64", n)
	}
	s := New()
	for i := range 2*chunkSize + 3 {
		s.Get("maas", fmt.Sprintf("node-%d", i), true)
	}
	for i := range uint32(s.Len()) {
		if a := uintptr(unsafe.Pointer(s.At(i))); a%64 != 0 {
			t.Fatalf("identity %d at %#x: not on a cache line boundary", i, a)
		}
	}
}
