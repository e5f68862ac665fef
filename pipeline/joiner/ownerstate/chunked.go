package ownerstate

// chunked is a growing array of T held in chunks of chunkSize elements.
// Appending never moves what is there: a doubling slice copies all of it
// and, while it does, holds both copies, which at a few million shapes or
// findings was a large share of a joiner's allocations and of its peak
// heap as a partition's state first grows. Only the first chunk grows by
// doubling (a store of a few identities does not hold a full chunk), so
// a pointer to an element stays valid once the store holds more than
// chunkSize of them, and until the next Append before.
//
// sink.Packed is the same idea for a batch's output rows, with other
// needs: its rows never move, from the first on, and it is emptied and
// refilled every round, keeping its chunks; here a small store stays
// small, a load can size the first chunk (Grow), and indices are uint32
// to keep the state compact.
type chunked[T any] struct {
	chunks [][]T // each chunkSize long but the last
	n      int
}

// firstChunk is the capacity the first chunk starts with.
const firstChunk = 16

// Len returns the number of elements.
func (c *chunked[T]) Len() int { return c.n }

// At returns element i (i < Len).
func (c *chunked[T]) At(i uint32) *T { return &c.chunks[i>>chunkBits][i&(chunkSize-1)] }

// Append adds v and returns its index.
func (c *chunked[T]) Append(v T) uint32 {
	k := len(c.chunks) - 1
	if k < 0 || len(c.chunks[k]) == chunkSize {
		size := chunkSize
		if k < 0 {
			size = firstChunk
		}
		c.chunks = append(c.chunks, make([]T, 0, size))
		k++
	}
	c.chunks[k] = append(c.chunks[k], v)
	c.n++
	return uint32(c.n - 1)
}

// Grow sizes an empty array's first chunk for n elements, up to a full
// chunk (a load that knows its size; later chunks are full-size anyway).
func (c *chunked[T]) Grow(n int) {
	if c.n == 0 && len(c.chunks) == 0 && n > 0 {
		c.chunks = append(c.chunks, make([]T, 0, min(n, chunkSize)))
	}
}
