package dedupe

import "testing"

func TestObserve(t *testing.T) {
	s := New()
	steps := []struct {
		producer string
		hasSeq   bool
		seq      uint64
		id       string
		dup      bool
	}{
		{"p1", true, 1, "a", false},
		{"p1", true, 1, "b", true},  // same (producer, seq): a redelivery, whatever the id
		{"p2", true, 1, "a", false}, // another producer's seq 1 is another event
		{"p1", false, 0, "a", false},
		{"p1", false, 0, "a", true},
		{"p2", false, 0, "a", false},
		{"p1", true, 1 << 40, "c", false},
	}
	for i, st := range steps {
		if got := s.Observe(st.producer, st.hasSeq, st.seq, st.id); got != st.dup {
			t.Fatalf("step %d: Observe = %v, want %v", i, got, st.dup)
		}
	}
	if s.Len() != 5 {
		t.Fatalf("Len = %d, want 5", s.Len())
	}
}
