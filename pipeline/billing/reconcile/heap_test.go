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
