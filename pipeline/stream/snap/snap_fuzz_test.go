package snap

import (
	"errors"
	"testing"
	"time"
)

// FuzzReader reads arbitrary bytes with an arbitrary sequence of reads
// (ops, one byte per read): no panic; the reader only moves forward; a
// count is bounded by the bytes left; and once an error is met it sticks,
// nothing more is consumed and every read returns a zero value.
func FuzzReader(f *testing.F) {
	var w Writer
	w.Header("section", 2)
	w.Uvarint(300)
	w.Varint(-5)
	w.Bool(true)
	w.String("héllo")
	w.Bytes([]byte{0, 1, 2})
	w.Float64(1.5)
	w.Time(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	w.Time(time.Time{})
	w.Uvarint(2)
	f.Add(w.B, []byte{9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10})
	f.Add([]byte{0xff, 0xff, 0xff}, []byte{0, 7, 2})
	f.Add([]byte{}, []byte{3})
	f.Fuzz(func(t *testing.T, b, ops []byte) {
		r := NewReader(b)
		var failed error
		for _, op := range ops {
			before := r.Len()
			var zero bool
			switch op % 11 {
			case 0:
				zero = r.Uvarint() == 0
			case 1:
				zero = r.Varint() == 0
			case 2:
				zero = r.Byte() == 0
			case 3:
				zero = !r.Bool()
			case 4:
				zero = r.String() == ""
			case 5:
				zero = len(r.Bytes()) == 0
			case 6:
				zero = r.Float64() == 0
			case 7:
				zero = r.Time().IsZero()
			case 8:
				min := int(op/11) + 1
				n := r.Count(min)
				if n > before/min {
					t.Fatalf("Count(%d) = %d with %d bytes left", min, n, before)
				}
				zero = n == 0
			case 9:
				r.Header("section", 2)
				zero = true
			case 10:
				zero = r.HeaderIn("section", 1, 3) == 0
			}
			if r.Len() > before {
				t.Fatalf("op %d: %d bytes left after, %d before", op%11, r.Len(), before)
			}
			if failed != nil {
				if r.Err() != failed || r.Len() != 0 || !zero {
					t.Fatalf("op %d after the error %v: err %v, %d bytes left, zero %v", op%11, failed, r.Err(), r.Len(), zero)
				}
			}
			if failed == nil && r.Err() != nil {
				failed = r.Err()
				if !errors.Is(failed, ErrShort) && op%11 < 9 {
					t.Fatalf("op %d failed with %v, want ErrShort", op%11, failed)
				}
			}
		}
	})
}
