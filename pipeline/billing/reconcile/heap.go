package reconcile

import (
	"iter"
	"slices"
)

// minHeap is a binary min-heap of T ordered by before: container/heap
// without boxing each element in an any, for the tracker's deadlines and
// window starts. Its elements are in chunks of heapChunk (the first one
// grows to that size by appending), so that a heap of millions of
// deadlines grows without copying itself into an array twice its size
// (which stays in memory, beside the new one, until the next collection)
// and gives back its chunks as it empties.
type minHeap[T interface{ before(T) bool }] struct {
	chunks [][]T
	n      int
}

// heapChunk is the number of elements of a heap chunk.
const heapChunk = 1 << 14

// Len returns the number of elements.
func (h *minHeap[T]) Len() int { return h.n }

func (h *minHeap[T]) at(i int) *T { return &h.chunks[i/heapChunk][i%heapChunk] }

// all yields the elements in no particular order.
func (h *minHeap[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for i := range h.n {
			if !yield(*h.at(i)) {
				return
			}
		}
	}
}

func (h *minHeap[T]) push(v T) {
	c := h.n / heapChunk
	switch {
	case c == len(h.chunks):
		size := heapChunk
		if c == 0 {
			size = 64
		}
		h.chunks = append(h.chunks, make([]T, 0, size))
	case len(h.chunks[c]) == cap(h.chunks[c]): // the first chunk, not yet full size
		h.chunks[c] = slices.Grow(h.chunks[c], min(cap(h.chunks[c]), heapChunk-cap(h.chunks[c])))
	}
	h.chunks[c] = append(h.chunks[c], v)
	h.n++
	for i := h.n - 1; i > 0; {
		p := (i - 1) / 2
		a, b := h.at(i), h.at(p)
		if !(*a).before(*b) {
			break
		}
		*a, *b = *b, *a
		i = p
	}
}

func (h *minHeap[T]) pop() T {
	n := h.n - 1
	top, last := h.at(0), h.at(n)
	v := *top
	*top = *last
	var zero T
	*last = zero
	c := n / heapChunk
	h.chunks[c] = h.chunks[c][:n%heapChunk]
	if n%heapChunk == 0 && c+1 < len(h.chunks) {
		// Chunk c, now empty, is kept for the next push; the one after
		// it is given back.
		clear(h.chunks[c+1:])
		h.chunks = h.chunks[:c+1]
	}
	h.n = n
	h.down(0)
	return v
}

// down moves the element at i down to its place.
func (h *minHeap[T]) down(i int) {
	for {
		m := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < h.n && (*h.at(c)).before(*h.at(m)) {
				m = c
			}
		}
		if m == i {
			return
		}
		a, b := h.at(i), h.at(m)
		*a, *b = *b, *a
		i = m
	}
}

// filter drops the elements keep rejects and gives back the chunks left
// empty; the rest stay a heap.
func (h *minHeap[T]) filter(keep func(T) bool) {
	n := 0
	for i := range h.n {
		if v := *h.at(i); keep(v) {
			*h.at(n) = v
			n++
		}
	}
	h.n = n
	if c := n / heapChunk; c < len(h.chunks) {
		h.chunks[c] = h.chunks[c][:n%heapChunk]
		clear(h.chunks[c+1:])
		h.chunks = h.chunks[:c+1]
	}
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// popTo pops, in order, the elements not after limit.
func (h *minHeap[T]) popTo(limit T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for h.n > 0 && !limit.before(*h.at(0)) {
			if !yield(h.pop()) {
				return
			}
		}
	}
}
