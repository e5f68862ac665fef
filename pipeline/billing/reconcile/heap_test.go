package reconcile

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMinHeapPopsInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h starts
	var want []windowStart
	for range 50000 {
		v := windowStart(r.IntN(100000))
		h.push(v)
		want = append(want, v)
	}
	slices.Sort(want)
	var got []windowStart
	for v := range h.popTo(50000) {
		got = append(got, v)
	}
	for h.Len() > 0 {
		got = append(got, h.pop())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// A filtered heap pops exactly the elements kept, in order, and keeps
// growing and shrinking across its chunks afterwards.
func TestMinHeapFilter(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h starts
	var want []windowStart
	for round := range 6 {
		for range r.IntN(3 * heapChunk) {
			v := windowStart(r.IntN(1 << 20))
			h.push(v)
			want = append(want, v)
		}
		for range r.IntN(heapChunk) {
			if h.Len() == 0 {
				break
			}
			v := h.pop()
			slices.Sort(want)
			if v != want[0] {
				t.Fatalf("round %d: popped %d, want %d", round, v, want[0])
			}
			want = want[1:]
		}
		mod := windowStart(2 + round)
		h.filter(func(v windowStart) bool { return v%mod != 0 })
		want = slices.DeleteFunc(want, func(v windowStart) bool { return v%mod == 0 })
		if h.Len() != len(want) {
			t.Fatalf("round %d: %d elements after the filter, want %d", round, h.Len(), len(want))
		}
		if c := (h.Len() + heapChunk) / heapChunk; len(h.chunks) > c {
			t.Fatalf("round %d: %d chunks kept for %d elements", round, len(h.chunks), h.Len())
		}
	}
	slices.Sort(want)
	for i, w := range want {
		if v := h.pop(); v != w {
			t.Fatalf("pop %d: %d, want %d", i, v, w)
		}
	}
	if h.Len() != 0 {
		t.Fatalf("%d elements left", h.Len())
	}
}
