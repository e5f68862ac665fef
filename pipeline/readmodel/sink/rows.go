package sink

// chunkShift sets the size of a Rows chunk: 1<<chunkShift rows.
const chunkShift = 12

// Rows is an append-only list of rows kept in chunks of 4,096: appending
// never moves the rows already there, where a slice grown by doubling
// copies them all again at every step (a catch-up round of a partition
// appends hundreds of thousands of 200-500-byte rows), and Reset keeps
// the chunks for the next batch, so a joiner's steady state appends
// without allocating. The zero value is empty and ready to use.
// (ownerstate's chunked array is the same idea for a partition's state,
// which lives on instead of being refilled, and is sized for it.)
type Rows[R any] struct {
	chunks [][]R // each full but the last in use; all allocated with room for a chunk
	n      int
}

// RowsOf returns a Rows holding a copy of rows, in order.
func RowsOf[R any](rows ...R) Rows[R] {
	var r Rows[R]
	for i := range rows {
		r.Append(&rows[i])
	}
	return r
}

// Len returns the number of rows.
func (r *Rows[R]) Len() int { return r.n }

// Append copies *v in as the last row and returns its index.
func (r *Rows[R]) Append(v *R) int {
	c := r.n >> chunkShift
	if c == len(r.chunks) {
		r.chunks = append(r.chunks, make([]R, 0, 1<<chunkShift))
	}
	r.chunks[c] = append(r.chunks[c], *v)
	r.n++
	return r.n - 1
}

// Set copies *v over the row at index i, which must be below Len.
func (r *Rows[R]) Set(i int, v *R) { *r.At(i) = *v }

// At returns the row at index i, which must be below Len. The pointer
// stays valid until Reset.
func (r *Rows[R]) At(i int) *R {
	return &r.chunks[i>>chunkShift][i&(1<<chunkShift-1)]
}

// All returns the rows as slices in order, each a chunk's rows in use
// (none empty); they alias the rows until the next Append or Reset.
func (r *Rows[R]) All() [][]R {
	used := (r.n + 1<<chunkShift - 1) >> chunkShift
	return r.chunks[:used]
}

// Reset empties r and keeps its chunks for the rows appended next. The
// rows' values stay referenced until they are overwritten (clearing them
// would cost a write barrier per pointer while a collection runs).
func (r *Rows[R]) Reset() {
	for i := range r.chunks {
		if len(r.chunks[i]) == 0 {
			break
		}
		r.chunks[i] = r.chunks[i][:0]
	}
	r.n = 0
}
