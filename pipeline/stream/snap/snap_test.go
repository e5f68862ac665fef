package snap

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 15, 30, 123456789, time.UTC)
	var w Writer
	w.Header("part", 1)
	w.Uvarint(1 << 40)
	w.Varint(-7)
	w.Bool(true)
	w.String("maas/node-1")
	w.Float64(0.25)
	w.Time(at)
	w.Time(time.Time{})
	w.Bytes(nil)
	w.Strings([]string{"a", "", "maas/node-2"})
	w.Strings(nil)

	r := NewReader(w.B)
	r.Header("part", 1)
	if got := r.Uvarint(); got != 1<<40 {
		t.Fatalf("uvarint %d", got)
	}
	if got := r.Varint(); got != -7 {
		t.Fatalf("varint %d", got)
	}
	if !r.Bool() {
		t.Fatal("bool")
	}
	if got := r.String(); got != "maas/node-1" {
		t.Fatalf("string %q", got)
	}
	if got := r.Float64(); got != 0.25 {
		t.Fatalf("float %v", got)
	}
	if got := r.Time(); !got.Equal(at) {
		t.Fatalf("time %v", got)
	}
	if got := r.Time(); !got.IsZero() {
		t.Fatalf("zero time %v", got)
	}
	if got := r.Bytes(); len(got) != 0 {
		t.Fatalf("bytes %q", got)
	}
	if got := r.Strings(); !slices.Equal(got, []string{"a", "", "maas/node-2"}) {
		t.Fatalf("strings %q", got)
	}
	if got := r.Strings(); got != nil {
		t.Fatalf("no strings %q", got)
	}
	if r.Err() != nil || r.Len() != 0 {
		t.Fatalf("err %v, %d bytes left", r.Err(), r.Len())
	}
}

func TestTruncatedAndCorrupt(t *testing.T) {
	var w Writer
	w.Header("part", 1)
	w.String("abcdef")
	for n := range len(w.B) {
		r := NewReader(w.B[:n])
		r.Header("part", 1)
		_ = r.String()
		if !errors.Is(r.Err(), ErrShort) {
			t.Fatalf("prefix %d: err %v", n, r.Err())
		}
	}
	r := NewReader(w.B)
	r.Header("part", 2)
	if r.Err() == nil {
		t.Fatal("version mismatch not detected")
	}
	// A huge count does not allocate: it is checked against what is left.
	var big Writer
	big.Uvarint(1 << 60)
	r = NewReader(big.B)
	if n := r.Count(8); n != 0 || !errors.Is(r.Err(), ErrShort) {
		t.Fatalf("count %d err %v", n, r.Err())
	}
}

func TestHeaderIn(t *testing.T) {
	var w Writer
	w.Header("sec", 2)
	for _, c := range []struct {
		oldest, newest, want byte
	}{{1, 2, 2}, {2, 3, 2}, {2, 2, 2}, {3, 4, 0}, {1, 1, 0}} {
		r := NewReader(w.B)
		if got := r.HeaderIn("sec", c.oldest, c.newest); got != c.want || (got == 0) != (r.Err() != nil) {
			t.Errorf("versions %d to %d: %d, err %v", c.oldest, c.newest, got, r.Err())
		}
	}
	if r := NewReader(w.B); r.HeaderIn("other", 1, 2) != 0 || r.Err() == nil {
		t.Error("another section's name was accepted")
	}
}

// TestVarintAsBinary: Reader.Varint decodes what binary.Varint decodes,
// the extremes and a truncated varint included.
func TestVarintAsBinary(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 1 << 40, -(1 << 40), math.MaxInt64, math.MinInt64} {
		b := binary.AppendVarint(nil, v)
		if got := NewReader(b).Varint(); got != v {
			t.Fatalf("Varint of %d = %d", v, got)
		}
		r := NewReader(b[:len(b)-1])
		if got := r.Varint(); got != 0 || !errors.Is(r.Err(), ErrShort) {
			t.Fatalf("Varint of %d cut short = %d, %v", v, got, r.Err())
		}
	}
}

func TestUvarintLen(t *testing.T) {
	var buf [binary.MaxVarintLen64]byte
	for _, v := range []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1<<35 - 1, 1 << 35, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		if got, want := UvarintLen(v), binary.PutUvarint(buf[:], v); got != want {
			t.Errorf("UvarintLen(%d) = %d, want %d", v, got, want)
		}
	}
}

// TestWriterDoubles checks that a Writer whose buffer runs out doubles
// it, where append would grow a large one by a quarter, and keeps what
// was written.
func TestWriterDoubles(t *testing.T) {
	const size = 1 << 20
	w := Writer{B: make([]byte, 0, size)}
	w.B = w.B[:size-4] // 4 bytes left
	w.Uint64(7)
	if cap(w.B) < 2*size {
		t.Fatalf("capacity %d after running out of %d, want at least %d", cap(w.B), size, 2*size)
	}
	w.String("abc")
	w.Bytes([]byte{1, 2})
	r := NewReader(w.B[size-4:])
	if got := r.Uint64(); got != 7 {
		t.Fatalf("Uint64 %d, want 7", got)
	}
	if got := r.String(); got != "abc" {
		t.Fatalf("String %q, want abc", got)
	}
	if got := r.Bytes(); !slices.Equal(got, []byte{1, 2}) || r.Err() != nil || r.Len() != 0 {
		t.Fatalf("Bytes %v, err %v, %d bytes left", got, r.Err(), r.Len())
	}
}
