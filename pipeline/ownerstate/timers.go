package ownerstate

import "math"

// Timer kinds.
const (
	TimerMissing uint8 = iota
	TimerOrphan
	numTimers
)

func armedFlag(kind uint8) uint8 {
	if kind == TimerOrphan {
		return flagArmedOrphan
	}
	return flagArmedMissing
}

// timer is a heap entry: identity idx is due at at (at or before its
// earliest armed deadline). 12 bytes: the time is split in two halves so
// the entry needs no 8-byte alignment.
type timer struct {
	lo, hi uint32 // at
	idx    uint32
}

func newTimer(at int64, idx uint32) timer {
	return timer{lo: uint32(uint64(at)), hi: uint32(uint64(at) >> 32), idx: idx}
}

func (t timer) at() int64 { return int64(uint64(t.hi)<<32 | uint64(t.lo)) }

func (t timer) less(u timer) bool {
	a, b := t.at(), u.at()
	return a < b || a == b && t.idx < u.idx
}

// timerHeap is a binary min-heap of timers in (at, idx) order with at most
// one entry per identity, whose position it keeps in Identity.hpos (1 +
// the position; 0: none), so moving an entry earlier is a sift in place
// and no superseded entry is ever left behind.
type timerHeap []timer

// Deadline returns the identity's current deadline of kind. The Store
// asks it of its owner (the classifier), whose rules define the
// deadlines; Arm must be called whenever a state change moves one.
type Deadline func(id *Identity, kind uint8) int64

// SetDeadline installs the deadline rule. It must be set before the first
// Arm.
func (s *Store) SetDeadline(d Deadline) { s.deadline = d }

// Armed reports whether id has a deadline of kind armed.
func (id *Identity) Armed(kind uint8) bool { return id.flags&armedFlag(kind) != 0 }

// queued returns the time of id's heap entry, NoTime if it has none.
func (s *Store) queued(id *Identity) int64 {
	if id.hpos == 0 {
		return NoTime
	}
	return s.timers[id.hpos-1].at()
}

// Arm arms (or, with on false, disarms) id's deadline of kind, whose time
// the Deadline rule gives. An identity has one heap entry at a time, at
// or before its earliest armed deadline: a deadline that moves later (a
// new observation) costs nothing here, the entry is moved when it comes
// due; only one that moves earlier moves the entry.
func (s *Store) Arm(id *Identity, kind uint8, on bool) {
	f := armedFlag(kind)
	switch was := id.flags&f != 0; {
	case on && !was:
		id.flags |= f
		s.armed++
	case !on && was:
		id.flags &^= f
		s.armed--
	}
	if !on {
		return
	}
	if at := s.deadline(id, kind); id.hpos == 0 || at < s.timers[id.hpos-1].at() {
		s.enqueue(id, at)
	}
}

// enqueue gives id a heap entry at at, or moves its entry there (earlier
// only).
func (s *Store) enqueue(id *Identity, at int64) {
	if id.hpos == 0 {
		if len(s.timers) == cap(s.timers) {
			// Grow by an eighth, not append's quarter: the heap has an
			// entry for about every identity.
			s.timers = append(make(timerHeap, 0, len(s.timers)+len(s.timers)/8+64), s.timers...)
		}
		s.timers = append(s.timers, newTimer(at, id.idx))
		id.hpos = uint32(len(s.timers))
	} else {
		s.timers[id.hpos-1] = newTimer(at, id.idx)
	}
	s.siftUp(int(id.hpos - 1))
}

func (s *Store) siftUp(i int) {
	h := s.timers
	t := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(h[p]) {
			break
		}
		h[i] = h[p]
		s.At(h[i].idx).hpos = uint32(i + 1)
		i = p
	}
	h[i] = t
	s.At(t.idx).hpos = uint32(i + 1)
}

func (s *Store) siftDown(i int) {
	h := s.timers
	n := len(h)
	t := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].less(h[c]) {
			c = r
		}
		if !h[c].less(t) {
			break
		}
		h[i] = h[c]
		s.At(h[i].idx).hpos = uint32(i + 1)
		i = c
	}
	h[i] = t
	s.At(t.idx).hpos = uint32(i + 1)
}

// popTimer removes the earliest entry and returns it.
func (s *Store) popTimer() timer {
	h := s.timers
	t := h[0]
	s.At(t.idx).hpos = 0
	last := len(h) - 1
	if last > 0 {
		h[0] = h[last]
	}
	s.timers = h[:last]
	if last > 0 {
		s.siftDown(0)
	}
	return t
}

// initTimers orders s.timers into a heap and sets every hpos.
func (s *Store) initTimers() {
	for i, t := range s.timers {
		s.At(t.idx).hpos = uint32(i + 1)
	}
	for i := len(s.timers)/2 - 1; i >= 0; i-- {
		s.siftDown(i)
	}
}

// next returns id's earliest armed deadline and its kind.
func (s *Store) next(id *Identity) (at int64, kind uint8, ok bool) {
	at = math.MaxInt64
	for k := range numTimers {
		if id.Armed(k) {
			if d := s.deadline(id, k); d < at {
				at, kind, ok = d, k, true
			}
		}
	}
	return at, kind, ok
}

// Fire calls fn for every armed deadline due at or before w, in deadline
// order per identity and in heap order ((entry time, index)) across
// identities; the deadline is disarmed before fn runs (fn re-arms what the
// new state needs).
func (s *Store) Fire(w int64, fn func(id *Identity, kind uint8, at int64)) {
	for len(s.timers) > 0 && s.timers[0].at() <= w {
		t := s.popTimer()
		id := s.At(t.idx)
		for {
			at, kind, ok := s.next(id)
			switch {
			case !ok:
			case at > w:
				if id.hpos == 0 || at < s.timers[id.hpos-1].at() {
					s.enqueue(id, at)
				}
			default:
				id.flags &^= armedFlag(kind)
				s.armed--
				fn(id, kind, at)
				continue
			}
			break
		}
	}
}

// PendingTimers returns the number of entries in the heap: one per
// identity with an armed deadline, and one per identity whose deadlines
// were disarmed since its entry was placed (until the entry comes due).
func (s *Store) PendingTimers() int { return len(s.timers) }
