package reconcile

import "iter"

// minHeap is a binary min-heap of T ordered by before: container/heap
// without boxing each element in an any, for the tracker's deadlines and
// window starts.
type minHeap[T interface{ before(T) bool }] []T

func (h *minHeap[T]) push(v T) {
	*h = append(*h, v)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *minHeap[T]) pop() T {
	s := *h
	top, n := s[0], len(s)-1
	s[0] = s[n]
	var zero T
	s[n] = zero
	s = s[:n]
	for i := 0; ; {
		m := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < n && s[c].before(s[m]) {
				m = c
			}
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// popTo pops, in order, the elements not after limit.
func (h *minHeap[T]) popTo(limit T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for len(*h) > 0 && !limit.before((*h)[0]) {
			if !yield(h.pop()) {
				return
			}
		}
	}
}
