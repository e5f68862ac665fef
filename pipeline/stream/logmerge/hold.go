package logmerge

import (
	"time"
)

// The live-tail hold. A stream that is caught up (its queue empty, no
// more records below its end) cannot say that a record with an earlier
// timestamp than the other streams' heads is still in flight to the
// broker: a producer retrying across a broker restart delivers records
// it timestamped before the restart after the records other producers
// sent since. Without a hold the merge releases the other streams at
// once and such a record is applied late (Merge.Late); a replay applies
// it in timestamp order. With a hold H (SetHold), a release that is
// possible only because some stream is idle (caught up and empty) waits
// until the idle stream has held a release for H of wall time, as Kafka
// Streams' max.task.idle.ms does; the wait ends at once when the idle
// stream gets records, or its records show it has more, and the order is
// exact again.
//
// A stream paused by a Throttle that runs empty (its queue drained below
// the resume mark within one apply) is waited for under a hold, the
// hold's clock not running: its More is as of its pause, and records produced since are
// not fetched. The Throttle resumes it after the apply; from then on it
// is idle as any other stream until its next fetch says what it has.
//
// The clock of an idle stream starts at the first release it holds,
// not when it ran empty: a stream that was active before a broker
// outage, and ran empty because nothing was fetched, holds the first
// records fetched after it for H. Once an idle stream has held a
// release for H it holds nothing more until it gets records again: a
// topic nobody writes to costs H once per idle spell, not H per record.
// A record whose timestamp is H or more before the wall clock is never
// held: a record timestamped before it and still in flight took longer
// to reach the broker than the hold is meant to cover, so a consumer that
// catches up (after a restore, a rebalance or a stall) applies what is
// older than H at once, and holds only the records of the last H. That
// reads the producers' timestamps against the consumer's clock: a
// producer whose clock is behind by s shortens the hold of its records
// by s.
//
// A restore or a replay reads up to known targets and has nothing in
// flight: it merges without a hold (its merges have none until the
// consumer sets one once they are live).

// hold is the live-tail hold of a Merge.
type hold struct {
	// d is the hold; 0: none.
	d time.Duration
	// now reads the wall clock.
	now func() time.Time
	// since is, per stream, when the stream first held a release in its
	// idle spell; zero: it has held none since it last got records.
	since []time.Time
	// over says the stream's hold ran out in its idle spell.
	over []bool
	// expired counts the holds that ran out (see TakeHoldsExpiredAll).
	expired int64
}

// SetHold makes the merge hold releases at the live tail for d of wall
// time read from now (time.Now when nil); 0 turns the hold off. A
// consumer sets it once its merge is live, after a restore: a restore
// merges without a hold.
func (m *Merge) SetHold(d time.Duration, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	n := len(m.Queue)
	m.hold = hold{d: d, now: now, since: make([]time.Time, n), over: make([]bool, n)}
}

// Hold returns the merge's hold (see SetHold).
func (m *Merge) Hold() time.Duration { return m.hold.d }

// idle reports whether stream s is caught up and empty: a stream a
// release may have to be held for (or waited for, while it is paused).
func (m *Merge) idle(s int) bool {
	return len(m.Queue[s]) == 0 && !m.More[s]
}

// awake ends the idle spell of stream s, which got records or has more
// (Push).
func (m *Merge) awake(s int) {
	if m.hold.d > 0 {
		m.hold.since[s], m.hold.over[s] = time.Time{}, false
	}
}

// held reports whether the next release must wait for the hold: records
// are queued, no stream with more records is empty (then the merge waits
// for it anyway), and some idle stream is paused, or has held releases
// for less than the hold while the next record is younger than the hold.
// It starts the clock of the idle streams holding their first release.
func (m *Merge) held() bool {
	h := &m.hold
	if h.d <= 0 {
		return false
	}
	var head time.Time // of the next record
	queued := false
	for s, q := range m.Queue {
		if len(q) != 0 {
			if !queued || q[0].Timestamp.Before(head) {
				head = q[0].Timestamp
			}
			queued = true
		} else if m.More[s] {
			return false
		}
	}
	if !queued {
		return false
	}
	idle := false
	for s := range m.Queue {
		if m.idle(s) {
			if m.Paused[s] {
				return true // not fetched since its pause
			}
			idle = idle || !h.over[s]
		}
	}
	if !idle {
		return false
	}
	now := h.now()
	if now.Sub(head) >= h.d {
		return false // what was in flight before it has arrived
	}
	held := false
	for s := range m.Queue {
		if !m.idle(s) || h.over[s] {
			continue
		}
		if h.since[s].IsZero() {
			h.since[s] = now
		}
		if now.Sub(h.since[s]) < h.d {
			held = true
			continue
		}
		h.over[s] = true
		h.expired++
	}
	return held
}

// ready is Ready under the hold: it follows Pop's releases over the
// queues, changing nothing.
func (m *Merge) ready() int {
	h := &m.hold
	now := h.now()
	var buf [8]int
	pos := buf[:0]
	if len(m.Queue) > len(buf) {
		pos = make([]int, 0, len(m.Queue))
	}
	pos = pos[:len(m.Queue)]
	for n := 0; ; n++ {
		best := -1
		for s, q := range m.Queue {
			if pos[s] < len(q) {
				if best < 0 || q[pos[s]].Timestamp.Before(m.Queue[best][pos[best]].Timestamp) {
					best = s
				}
			} else if m.More[s] {
				return n
			}
		}
		if best < 0 {
			return n
		}
		holding := false
		for s, q := range m.Queue {
			if pos[s] < len(q) || m.More[s] {
				continue
			}
			if m.Paused[s] {
				return n
			}
			// Empty from the start: its own clock; run empty here: a new
			// idle spell, whose clock starts now.
			holding = holding || len(q) != 0 || m.holding(s, now)
		}
		if holding && now.Sub(m.Queue[best][pos[best]].Timestamp) < h.d {
			return n
		}
		pos[best]++
	}
}

// holding reports whether the idle stream s would hold a release now:
// it has held none in its idle spell yet, or has held them for less
// than the hold. It changes nothing (Ready).
func (m *Merge) holding(s int, now time.Time) bool {
	h := &m.hold
	return !h.over[s] && (h.since[s].IsZero() || now.Sub(h.since[s]) < h.d)
}

// TakeHoldsExpiredAll returns how many holds of parts' merges (merge
// returns a partition's) ran out since the last call: each time a stream
// idle at the live tail held a release for the whole hold and the merge
// went on without it. It starts counting again.
func TakeHoldsExpiredAll[P any](parts map[int32]P, merge func(P) *Merge) int64 {
	var n int64
	for _, part := range parts {
		m := merge(part)
		n += m.hold.expired
		m.hold.expired = 0
	}
	return n
}
