package reconcile

import (
	"time"

	"github.com/driftline/driftline/pipeline/billing/claims"
)

// The horizon bounds the tracker's memory in event time. A window closes
// when the watermark passes its end + Rules.Horizon. Then every settled
// usage_id of the window (accepted, rated and posted; or refused by the
// rater with nothing else behind it) is dropped from memory, with its
// resolved mismatch rows; usage that is not settled stays tracked until it
// settles. A closed window's conservation row is dropped once no tracked
// usage_id is counted in it; its last row is final in ClickHouse. What
// happens later to a dropped usage_id or window is in
// docs/billing-model.md ("The horizon"). Everything here depends only on
// the order of the applied events and their event times, so a replay drops
// the same state at the same points.

// closed reports whether the window starting at start (Unix seconds) is
// past the horizon.
func (t *Tracker) closed(start int64) bool {
	if t.watermark.IsZero() {
		return false
	}
	end := time.Unix(start, 0).Add(WindowSize + t.rules.Horizon)
	return !t.watermark.Before(end)
}

// register marks s to be swept with the window starting at start. The
// usage of a start is not listed: the sweep that closes it finds its
// usage in the slab (regStart), so that a usage_id costs no entry in a
// list per window.
func (t *Tracker) register(start int64, s *usageState) {
	if _, ok := t.byStart[start]; !ok {
		t.byStart[start] = struct{}{}
		t.starts.push(windowStart(start))
	}
	s.regHour = int32(start / int64(WindowSize/time.Second))
	s.mark(registered)
}

// linger lists s to be checked at every sweep until it settles.
func (t *Tracker) linger(s *usageState) {
	if !s.is(lingering) {
		s.mark(lingering)
		t.lingering = append(t.lingering, s.ref())
	}
}

// sweep closes every window the watermark has passed by the horizon, and
// once per hour of watermark drops the lingering usage that settled.
func (t *Tracker) sweep() {
	swept := false
	if h := t.watermark.Unix() / int64(WindowSize/time.Second); h != t.sweptHour {
		t.sweptHour, swept = h, true
	}
	var closing map[int64]bool
	for t.starts.Len() > 0 && t.closed(int64(*t.starts.at(0))) {
		start := int64(t.starts.pop())
		if closing == nil {
			closing = map[int64]bool{}
		}
		closing[start] = true
		delete(t.byStart, start)
	}
	if closing != nil {
		// One pass over the slab for every window closed now: at most one
		// an hour of event time.
		t.states.each(func(s *usageState) {
			if !s.is(registered) || !closing[s.regStart()] {
				return // registered with a window still open
			}
			if settled(s) {
				t.prune(s)
			} else {
				t.linger(s)
			}
		})
		for start := range closing {
			for _, k := range t.windowsByStart[start] {
				if w := t.windows[k]; w != nil && w.live == 0 && !w.unbalanced {
					t.dropWindow(w)
				}
			}
			delete(t.windowsByStart, start)
		}
	}
	if swept {
		if f, ok := t.floor(); ok {
			t.claims.Forget(f)
		}
	}
	if swept && len(t.lingering) > 0 {
		keep := t.lingering[:0]
		for _, r := range t.lingering {
			s := t.states.get(r)
			switch {
			case s == nil:
			case settled(s) && (s.win == 0 || t.closed(t.wins[s.win].key.Start)):
				t.prune(s)
			default:
				keep = append(keep, r)
			}
		}
		clear(t.lingering[len(keep):])
		t.lingering = keep
	}
	t.states.compact(&t.strs)
}

// prune drops settled usage s from memory. Its contribution stays in its
// window's row.
func (t *Tracker) prune(s *usageState) {
	t.pruned++
	t.park(s)
	if s.is(claimsKey) {
		// The claim outlives the state until its generation is forgotten.
		key := t.stateKey(s)
		h := claims.Hash(key)
		t.unclaim(s, h)
		if f, ok := t.floor(); !ok || !t.forgotten(s.at, f) {
			t.claims.Gen(s.at).Add(h, key, t.strs.get(s.id), s.digest)
		}
	}
	if s.win != 0 {
		w := t.wins[s.win]
		w.live--
		if w.live == 0 && !w.unbalanced {
			t.dropWindow(w)
		}
	}
	t.states.remove(&t.strs, s)
}

// dropWindow forgets a closed window's row (a pending write still happens:
// the dirty list holds it).
func (t *Tracker) dropWindow(w *windowState) {
	if t.windows[w.key] != w {
		return
	}
	delete(t.windows, w.key)
	t.wins[w.num] = nil
	t.freeWins = append(t.freeWins, w.num)
	id := windowMismatchKey(w.key, t.partition)
	if m, ok := t.mismatches[id]; ok && !m.open {
		delete(t.mismatches, id)
	}
}

// Tracked returns the number of usage_ids held in memory and the number
// of conservation windows.
func (t *Tracker) Tracked() (usage, windows int) { return t.states.n, len(t.windows) }

// Pruned returns how many settled usage_ids the horizon dropped, and how
// many changes came for windows already dropped (not counted in any row).
func (t *Tracker) Pruned() (pruned, late int64) { return t.pruned, t.late }

// starts is a min-heap of window starts.
type starts = minHeap[windowStart]

// windowStart is the start of a conservation window in unix seconds, as
// byStart keys it.
type windowStart int64

//lint:ignore U1000 called through minHeap's type constraint, which staticcheck does not follow
func (a windowStart) before(b windowStart) bool { return a < b }
