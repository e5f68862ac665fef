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

// timer is a queue entry: identity idx is due at at (at or before its
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

// timerHeap is the store's timer queue: at most one entry per identity,
// whose position the identity keeps in Identity.hpos (1 + the position;
// 0: none), so moving an entry earlier is done in place and no superseded
// entry is ever left behind. Entries come out in (at, idx) order.
//
// The array has two parts. The front, timers[:Store.near], is a 4-ary
// min-heap of the earliest entries: those at or before Store.lim. The
// rest, the far part, are the entries after the limit, in no order. A new
// entry at or before the limit joins the heap, any other is appended to
// the far part; a far entry moved to at or before the limit joins the
// heap. When the heap runs empty, refill moves the earliest few percent of
// the far entries into it and sets a new limit.
//
// Why not one heap of all the entries: almost every identity's missing
// deadline is moved later by its next observation long before it comes
// due, so most entries are popped only to be queued again, later. A pop
// sifts the heap's last entry, a late one, from the root to the bottom:
// at a million entries 20 levels, each a dependent read of the array and
// a write of the moved entry's identity (its hpos), most of them cache
// misses. The far part needs no sift until its entries come near:
// queuing there is an append, and the heap popped from holds a few
// percent of the entries, so a sift is shorter and its array, and more of
// its identities, stay in the caches. The heap is 4-ary because that halves the levels, and so
// the identity writes, of a sift, and the four children of a node are in
// one or two cache lines. (A 4-ary heap of all the entries is not
// measurably faster than a binary one: a sift reads as many lines that
// miss the caches.)
type timerHeap []timer

// refillSamples and refillRank choose the limit of a refill: the
// refillRank-th earliest (from 0) of refillSamples entries spaced evenly
// over the far part, so that about (refillRank+1)/(refillSamples+1), a
// thirty-second, of the far entries move into the heap. A refill reads
// every far entry once: a pop costs about 32 entries read in order, for a
// heap a thirty-second the size. (A sixteenth costs about the same: half
// the entries read, a heap twice the size.)
const (
	refillSamples = 128
	refillRank    = 3
)

// Deadline returns the identity's current deadline of kind. The Store
// asks it of its owner (the classifier), whose rules define the
// deadlines; Arm must be called whenever a state change moves one.
type Deadline func(id *Identity, kind uint8) int64

// SetDeadline installs the deadline rule. It must be set before the first
// Arm.
func (s *Store) SetDeadline(d Deadline) { s.deadline = d }

// Armed reports whether id has a deadline of kind armed.
func (id *Identity) Armed(kind uint8) bool { return id.flags&armedFlag(kind) != 0 }

// queued returns the time of id's queue entry, NoTime if it has none.
func (s *Store) queued(id *Identity) int64 {
	if id.hpos == 0 {
		return NoTime
	}
	return s.timers[id.hpos-1].at()
}

// Arm arms (or, with on false, disarms) id's deadline of kind, whose time
// the Deadline rule gives. An identity has one queue entry at a time, at
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

// enqueue gives id a queue entry at at, or moves its entry there (earlier
// only).
func (s *Store) enqueue(id *Identity, at int64) {
	if id.hpos == 0 {
		if len(s.timers) == cap(s.timers) {
			// Grow by an eighth, not append's quarter: the queue has an
			// entry for about every identity.
			s.timers = append(make(timerHeap, 0, len(s.timers)+len(s.timers)/8+64), s.timers...)
		}
		s.timers = append(s.timers, newTimer(at, id.idx))
		id.hpos = uint32(len(s.timers))
	} else {
		s.timers[id.hpos-1] = newTimer(at, id.idx)
	}
	i := int(id.hpos - 1)
	switch {
	case i < s.near:
		// In the heap, and earlier than it was: it can only move up.
	case s.near > 0 && at <= s.lim:
		// A far entry (or a new one) that belongs in the heap: it
		// changes places with the first far entry, and the heap grows
		// over it. (While the heap is empty every entry is far: the
		// next refill sets a limit from them all.)
		s.swapTimers(i, s.near)
		i = s.near
		s.near++
	default:
		return
	}
	s.siftUp(i)
}

// swapTimers exchanges the entries at i and j.
func (s *Store) swapTimers(i, j int) {
	if i == j {
		return
	}
	ti, tj := s.timers[i], s.timers[j]
	s.setTimer(i, tj)
	s.setTimer(j, ti)
}

// setTimer puts t at i of s.timers and notes its place in t's identity.
func (s *Store) setTimer(i int, t timer) {
	s.timers[i] = t
	s.At(t.idx).hpos = uint32(i + 1)
}

func (s *Store) siftUp(i int) {
	h := s.timers
	t := h[i]
	for i > 0 {
		p := (i - 1) / 4
		if !t.less(h[p]) {
			break
		}
		s.setTimer(i, h[p])
		i = p
	}
	s.setTimer(i, t)
}

// siftDown moves the heap entry at i down to its place in the heap
// (s.timers[:s.near]).
func (s *Store) siftDown(i int) {
	h := s.timers[:s.near]
	n := len(h)
	t := h[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < min(c+4, n); j++ {
			if h[j].less(h[m]) {
				m = j
			}
		}
		if !h[m].less(t) {
			break
		}
		s.setTimer(i, h[m])
		i = m
	}
	s.setTimer(i, t)
}

// popTimer removes the earliest entry, the heap's root (the heap must not
// be empty), and returns it.
func (s *Store) popTimer() timer {
	h := s.timers
	t := h[0]
	s.At(t.idx).hpos = 0
	last, end := s.near-1, len(h)-1
	if last > 0 {
		h[0] = h[last] // sifted down below
	}
	if end > last {
		// The array's last entry, a far one (often the latest queued,
		// whose identity is in the caches still), fills the heap's last
		// place, which becomes far.
		s.setTimer(last, h[end])
	}
	s.timers, s.near = h[:end], last
	if last > 0 {
		s.siftDown(0)
	}
	return t
}

// refill fills the empty heap (s.near is 0) from the far part and reports
// whether there was anything to fill it with. The limit is a sampled
// entry's time, so at least that entry moves into the heap.
func (s *Store) refill() bool {
	h := s.timers
	n := len(h)
	if n == 0 {
		return false
	}
	// early holds the earliest times of the sample so far, in order.
	var early [refillRank + 1]int64
	m := min(n, refillSamples)
	for k := range m {
		at := h[k*n/m].at()
		c := min(k, len(early)) // times in early
		if c == len(early) && at >= early[c-1] {
			continue
		}
		j := min(c, len(early)-1) // a full early drops its last
		for ; j > 0 && early[j-1] > at; j-- {
			early[j] = early[j-1]
		}
		early[j] = at
	}
	// With fewer samples than early holds, the latest: they all move.
	lim := early[min(m, len(early))-1]
	// Partition: the entries at or before the limit to the front.
	i, j := 0, n-1
	for {
		for i <= j && h[i].at() <= lim {
			i++
		}
		for i <= j && h[j].at() > lim {
			j--
		}
		if i > j {
			break
		}
		s.swapTimers(i, j)
	}
	s.near, s.lim = i, lim
	for p := (i - 2) / 4; i > 1 && p >= 0; p-- {
		s.siftDown(p)
	}
	return true
}

// initTimers sets the hpos of every entry of s.timers, all far: the first
// Fire orders them.
func (s *Store) initTimers() {
	for i, t := range s.timers {
		s.At(t.idx).hpos = uint32(i + 1)
	}
	s.near = 0
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
// order per identity and in queue order ((entry time, index)) across
// identities; the deadline is disarmed before fn runs (fn re-arms what the
// new state needs).
func (s *Store) Fire(w int64, fn func(id *Identity, kind uint8, at int64)) {
	for (s.near > 0 || s.refill()) && s.timers[0].at() <= w {
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

// PendingTimers returns the number of queue entries: one per identity
// with an armed deadline, and one per identity whose deadlines were
// disarmed since its entry was placed (until the entry comes due).
func (s *Store) PendingTimers() int { return len(s.timers) }
