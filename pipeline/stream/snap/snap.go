// Package snap is the binary codec of the joiner's state snapshots
// (checkpoints): a Writer appends varints, strings and times to a byte
// slice, a Reader reads them back in the same order. Each component of a
// partition's state (owner state, node-agent tracker, dedupe set) writes its
// own section with a version byte, so a format change is detected instead of
// misread.
//
// A Reader never panics on bad input: the first error (a short or malformed
// buffer) sticks, every later read returns a zero value, and Err reports it.
package snap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// ErrShort is returned for a snapshot that ends early or holds a length
// beyond its end.
var ErrShort = errors.New("snap: truncated snapshot")

// Writer appends to a byte slice. The zero value is ready to use. A
// caller that knows the size sets B to a slice with that capacity; when
// it must grow, it doubles (checked where strings, bytes and 8-byte
// values are written: the varints stay small enough to inline), where
// append grows a large slice by a quarter at a time and would copy a
// snapshot of tens of megabytes about five times over.
type Writer struct {
	B []byte
}

// room makes room for n more bytes.
func (w *Writer) room(n int) {
	if cap(w.B)-len(w.B) < n {
		w.grow(n)
	}
}

//go:noinline
func (w *Writer) grow(n int) { w.B = slices.Grow(w.B, max(n, cap(w.B))) }

// Uvarint appends v.
func (w *Writer) Uvarint(v uint64) { w.B = binary.AppendUvarint(w.B, v) }

// UvarintLen returns the length of v's uvarint encoding (what Uvarint
// and binary.PutUvarint write), for those who size a buffer before.
func UvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// Varint appends v.
func (w *Writer) Varint(v int64) { w.B = binary.AppendVarint(w.B, v) }

// Byte appends b.
func (w *Writer) Byte(b byte) { w.B = append(w.B, b) }

// Bool appends v as one byte.
func (w *Writer) Bool(v bool) {
	if v {
		w.B = append(w.B, 1)
		return
	}
	w.B = append(w.B, 0)
}

// String appends s with its length.
func (w *Writer) String(s string) {
	w.room(binary.MaxVarintLen64 + len(s))
	w.Uvarint(uint64(len(s)))
	w.B = append(w.B, s...)
}

// Bytes appends b with its length.
func (w *Writer) Bytes(b []byte) {
	w.room(binary.MaxVarintLen64 + len(b))
	w.Uvarint(uint64(len(b)))
	w.B = append(w.B, b...)
}

// Strings appends the count of l and then each string of l.
func (w *Writer) Strings(l []string) {
	w.Uvarint(uint64(len(l)))
	for _, s := range l {
		w.String(s)
	}
}

// Float64 appends v's IEEE 754 bits.
func (w *Writer) Float64(v float64) { w.Uint64(math.Float64bits(v)) }

// Uint64 appends v as 8 bytes, little endian: for hashes and digests,
// which a varint would spread over 10.
func (w *Writer) Uint64(v uint64) {
	w.room(8)
	w.B = binary.LittleEndian.AppendUint64(w.B, v)
}

// Time appends t as Unix nanoseconds; the zero time round-trips.
func (w *Writer) Time(t time.Time) {
	if t.IsZero() {
		w.Varint(math.MinInt64)
		return
	}
	w.Varint(t.UnixNano())
}

// Header appends a section header: its name (checked on read) and format
// version.
func (w *Writer) Header(name string, version byte) {
	w.String(name)
	w.Byte(version)
}

// Reader reads what a Writer wrote.
type Reader struct {
	b   []byte
	err error
}

// NewReader returns a Reader of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err returns the first error met, if any.
func (r *Reader) Err() error { return r.err }

// Len returns the number of bytes not read yet.
func (r *Reader) Len() int { return len(r.b) }

// Fail records err unless an error is already recorded.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
		r.b = nil
	}
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail(ErrShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a signed varint: an unsigned one in zig-zag encoding, as
// binary.Varint decodes it.
func (r *Reader) Varint() int64 {
	ux := r.Uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.Fail(ErrShort)
		return 0
	}
	b := r.b[0]
	r.b = r.b[1:]
	return b
}

// Bool reads a bool.
func (r *Reader) Bool() bool { return r.Byte() != 0 }

// Count reads a length or element count and checks that at least
// count*min bytes remain, so a corrupt count cannot make the caller
// allocate without bound.
func (r *Reader) Count(min int) int {
	n := r.Uvarint()
	if r.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(len(r.b)/min) {
		r.Fail(ErrShort)
		return 0
	}
	return int(n)
}

// Bytes reads a length-prefixed byte string. The result aliases the
// snapshot.
func (r *Reader) Bytes() []byte {
	n := r.Count(1)
	if r.err != nil {
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

// String reads a length-prefixed string (a copy).
func (r *Reader) String() string { return string(r.Bytes()) }

// Strings reads what Writer.Strings wrote; nil for none.
func (r *Reader) Strings() []string {
	n := r.Count(1)
	if n == 0 || r.err != nil {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = r.String()
	}
	return l
}

// Float64 reads an IEEE 754 float.
func (r *Reader) Float64() float64 { return math.Float64frombits(r.Uint64()) }

// Uint64 reads 8 bytes written by Writer.Uint64.
func (r *Reader) Uint64() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.Fail(ErrShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// Time reads a time written by Writer.Time, in UTC.
func (r *Reader) Time() time.Time {
	ns := r.Varint()
	if ns == math.MinInt64 || r.err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Header reads a section header and checks its name and version.
func (r *Reader) Header(name string, version byte) { r.HeaderIn(name, version, version) }

// HeaderIn reads a section header, checks its name and that its version
// is one of oldest..newest, which a reader still understands, and
// returns the version (0 on error).
func (r *Reader) HeaderIn(name string, oldest, newest byte) byte {
	got := string(r.Bytes())
	v := r.Byte()
	if r.err != nil {
		return 0
	}
	if got != name || v < oldest || v > newest {
		want := fmt.Sprintf("version %d", newest)
		if oldest != newest {
			want = fmt.Sprintf("versions %d to %d", oldest, newest)
		}
		r.Fail(fmt.Errorf("snap: section %q version %d, want %q %s", got, v, name, want))
		return 0
	}
	return v
}
