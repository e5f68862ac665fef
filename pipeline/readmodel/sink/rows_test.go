package sink

import (
	"reflect"
	"testing"
)

// TestRows appends across chunk boundaries and checks that every row
// stays where it was appended, that All holds the rows in order, and that
// Reset keeps the chunks: appending again allocates nothing.
func TestRows(t *testing.T) {
	const n = 3<<chunkShift + 17
	var r Rows[[2]int]
	var first *[2]int
	for i := range n {
		if got := r.Append(&[2]int{i, -i}); got != i {
			t.Fatalf("Append returned %d for row %d", got, i)
		}
		if i == 0 {
			first = r.At(0)
		}
	}
	if r.Len() != n || r.At(0) != first {
		t.Fatalf("Len %d (want %d); row 0 moved: %t", r.Len(), n, r.At(0) != first)
	}
	r.At(5)[1] = 99
	var all [][2]int
	for _, c := range r.All() {
		if len(c) == 0 {
			t.Fatal("All returned an empty chunk")
		}
		all = append(all, c...)
	}
	for i, v := range all {
		want := [2]int{i, -i}
		if i == 5 {
			want[1] = 99
		}
		if v != want {
			t.Fatalf("row %d = %v, want %v", i, v, want)
		}
	}
	if len(all) != n {
		t.Fatalf("All holds %d rows, want %d", len(all), n)
	}

	r.Reset()
	if r.Len() != 0 || len(r.All()) != 0 {
		t.Fatalf("after Reset: Len %d, %d chunks in All", r.Len(), len(r.All()))
	}
	if allocs := testing.AllocsPerRun(3, func() {
		r.Reset()
		for i := range n {
			r.Append(&[2]int{i, i})
		}
	}); allocs != 0 {
		t.Fatalf("appending into reset chunks allocated %.0f times", allocs)
	}

	if got := RowsOf([2]int{1, 2}, [2]int{3, 4}); !reflect.DeepEqual(got.All(), [][][2]int{{{1, 2}, {3, 4}}}) {
		t.Fatalf("RowsOf: %v", got.All())
	}
}
