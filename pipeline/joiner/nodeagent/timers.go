package nodeagent

// The tracker's timers are an indexed min-heap of nodes on their armed
// deadline: one entry per node at most, moved in place when a heartbeat
// pushes the deadline back, so the heap never holds stale entries and its
// size is bounded by the number of nodes.

func (t *Tracker) heapLess(i, j int) bool { return t.timers[i].deadline < t.timers[j].deadline }

func (t *Tracker) heapSwap(i, j int) {
	h := t.timers
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = int32(i)
	h[j].heapIdx = int32(j)
}

func (t *Tracker) heapUp(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !t.heapLess(j, i) {
			break
		}
		t.heapSwap(i, j)
		j = i
	}
}

func (t *Tracker) heapDown(i int) bool {
	n, i0 := len(t.timers), i
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && t.heapLess(r, l) {
			j = r
		}
		if !t.heapLess(j, i) {
			break
		}
		t.heapSwap(i, j)
		i = j
	}
	return i > i0
}

func (t *Tracker) heapFix(i int) {
	if !t.heapDown(i) {
		t.heapUp(i)
	}
}

func (t *Tracker) heapRemove(i int) {
	last := len(t.timers) - 1
	n := t.timers[i]
	if i != last {
		t.heapSwap(i, last)
	}
	t.timers[last] = nil
	t.timers = t.timers[:last]
	if i != last {
		t.heapFix(i)
	}
	n.heapIdx, n.deadline = -1, noDeadline
}
