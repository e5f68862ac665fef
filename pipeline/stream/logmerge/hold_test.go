package logmerge

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeClock is a wall clock a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }

// newFakeClock starts at the epoch, the time of rec's timestamps: the
// records of the tests are as young as the clock says.
func newFakeClock() *fakeClock { return &fakeClock{t: time.UnixMilli(0)} }
func heldMerge(n int, h time.Duration) (*Merge, *fakeClock) {
	c := newFakeClock()
	m := NewMerge(n)
	m.SetHold(h, c.now)
	return &m, c
}

// popAll pops until the merge waits and returns the timestamps (ms) of
// what it released; it checks that Ready said as many beforehand.
func popAll(t *testing.T, m *Merge) []int64 {
	t.Helper()
	ready := m.Ready()
	var got []int64
	for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
		got = append(got, r.Timestamp.UnixMilli())
	}
	if ready != len(got) {
		t.Fatalf("Ready said %d, Pop released %d (%v)", ready, len(got), got)
	}
	return got
}

// wantReleased pops as popAll and fails unless the merge released the
// records timestamped want (ms), in that order; why says when or why the
// test expects them.
func wantReleased(t *testing.T, m *Merge, why string, want ...int64) {
	t.Helper()
	if got := popAll(t, m); !slices.Equal(got, want) {
		t.Fatalf("released %v, want %v %s", got, want, why)
	}
}

// TestHoldWaitsForAnIdleStream: a release possible only because a stream
// is caught up and empty waits for the hold, and goes ahead once it has
// lasted H; the hold that ran out is counted.
func TestHoldWaitsForAnIdleStream(t *testing.T) {
	const h = 2 * time.Second
	m, clock := heldMerge(2, h)
	m.Push(0, []*kgo.Record{rec(10, 0)}, 0)
	m.Push(1, []*kgo.Record{rec(5, 0)}, 0)
	wantReleased(t, m, "(stream 0 has a head, stream 1 ran empty)", 5)
	clock.add(h - time.Nanosecond)
	wantReleased(t, m, "before the hold ran out")
	clock.add(time.Nanosecond)
	wantReleased(t, m, "after the hold", 10)
	parts := map[int32]*Merge{0: m}
	self := func(m *Merge) *Merge { return m }
	if n := TakeHoldsExpiredAll(parts, self); n != 1 {
		t.Fatalf("%d holds expired, want 1", n)
	}
	if n := TakeHoldsExpiredAll(parts, self); n != 0 {
		t.Fatalf("%d holds expired on the second take, want 0", n)
	}
	if m.Late != 0 {
		t.Fatalf("%d late records", m.Late)
	}
}

// TestHoldEndsWhenTheIdleStreamGetsRecords: the record in flight arrives
// within the hold and is applied in timestamp order, not late; the wait
// ends at once.
func TestHoldEndsWhenTheIdleStreamGetsRecords(t *testing.T) {
	m, clock := heldMerge(3, time.Minute)
	m.Push(0, []*kgo.Record{rec(20, 0), rec(30, 1)}, 0)
	wantReleased(t, m, "while streams 1 and 2 are idle")
	clock.add(time.Second)
	m.Push(1, []*kgo.Record{rec(15, 0)}, 0)
	wantReleased(t, m, "while stream 2 is idle")
	clock.add(time.Second)
	m.Push(2, []*kgo.Record{rec(12, 0), rec(25, 1)}, 0)
	// 12 and 15 go; 20 waits for stream 1, empty again (a new idle spell).
	wantReleased(t, m, "", 12, 15)
	m.Push(1, []*kgo.Record{rec(40, 1)}, 0)
	wantReleased(t, m, "(then stream 2 is empty)", 20, 25)
	// Every stream with a head: nothing held.
	m.Push(2, []*kgo.Record{rec(35, 2)}, 0)
	wantReleased(t, m, "", 30)
	if m.Late != 0 {
		t.Fatalf("%d late records", m.Late)
	}
	// A stream that says it has more ends its idle spell too; the merge
	// waits for it as without a hold.
	m.Push(0, nil, 3)
	wantReleased(t, m, "while stream 0 has more records")
	m.Push(0, []*kgo.Record{rec(50, 5)}, 0)
	wantReleased(t, m, "(then stream 2 is empty)", 35)
}

// TestHoldIdleTopicCostsOnce: a stream nobody writes to holds the first
// release of its idle spell for H, and none after it; records fetched
// later are released at once until it gets records itself.
func TestHoldIdleTopicCostsOnce(t *testing.T) {
	const h = time.Second
	m, clock := heldMerge(2, h)
	m.Push(0, []*kgo.Record{rec(10, 0)}, 0)
	wantReleased(t, m, "at once")
	clock.add(h)
	wantReleased(t, m, "", 10)
	for i := range int64(5) {
		clock.add(time.Millisecond)
		m.Push(0, []*kgo.Record{rec(20+2*i, 1+2*i), rec(21+2*i, 2+2*i)}, 0)
		if got := popAll(t, m); len(got) != 2 {
			t.Fatalf("fetch %d: released %v, want both records at once", i, got)
		}
	}
	if n := m.hold.expired; n != 1 {
		t.Fatalf("%d holds expired, want 1", n)
	}
	// Records of the idle stream end its spell: the next one holds again.
	m.Push(1, []*kgo.Record{rec(40, 0)}, 0)
	m.Push(0, []*kgo.Record{rec(45, 11)}, 0)
	wantReleased(t, m, "", 40)
	clock.add(h)
	wantReleased(t, m, "", 45)
}

// TestHoldAcrossAnOutage: a stream that ran empty when nothing more was
// fetched (a broker outage) holds the first records fetched after it for
// H from then, however long the outage lasted; markers alone do not end
// an idle spell.
func TestHoldAcrossAnOutage(t *testing.T) {
	const h = 5 * time.Second
	m, clock := heldMerge(2, h)
	m.Push(0, []*kgo.Record{rec(10, 0)}, 0)
	m.Push(1, []*kgo.Record{rec(10, 0)}, 0)
	wantReleased(t, m, "", 10)
	clock.add(h)
	wantReleased(t, m, "after the hold", 10)
	// Both streams empty; stream 1 has held nothing since it ran empty.
	clock.add(time.Minute) // nothing fetched
	now := clock.now().UnixMilli()
	m.Push(0, []*kgo.Record{rec(now, 1)}, 0)
	m.Push(1, nil, 0) // a fetch of stream 1 with markers only
	wantReleased(t, m, "right after the outage")
	clock.add(h / 2)
	m.Push(1, []*kgo.Record{rec(now-1000, 1)}, 0) // timestamped before the other
	wantReleased(t, m, "", now-1000)
	if m.Late != 0 {
		t.Fatalf("%d late records", m.Late)
	}
}

// TestHoldNotForOldRecords: a record timestamped H or more before the
// clock is released without waiting (a catch-up), the younger ones are
// held, and no hold ran out for it.
func TestHoldNotForOldRecords(t *testing.T) {
	const h = time.Second
	m, clock := heldMerge(2, h)
	clock.add(time.Minute)
	now := clock.now().UnixMilli()
	m.Push(0, []*kgo.Record{rec(now-5000, 0), rec(now-1000, 1), rec(now-999, 2), rec(now, 3)}, 0)
	wantReleased(t, m, "(the two records H or more old)", now-5000, now-1000)
	if m.hold.expired != 0 || !m.hold.since[1].Equal(clock.now()) {
		t.Fatalf("holds expired %d, clock of stream 1 from %v: want it started by the first record it held", m.hold.expired, m.hold.since[1])
	}
	clock.add(h)
	wantReleased(t, m, "(the rest, after the hold)", now-999, now)
}

// TestHoldWaitsForAPausedStream: a paused stream that ran empty (drained
// within one apply) has not been fetched since its pause: the merge waits
// for it, the hold's clock not running, until it is resumed; then it is
// idle as any other.
func TestHoldWaitsForAPausedStream(t *testing.T) {
	const h = time.Second
	m, clock := heldMerge(2, h)
	m.Push(1, []*kgo.Record{rec(5, 0)}, 0)
	m.Paused[1] = true
	m.Push(0, []*kgo.Record{rec(10, 0)}, 0)
	wantReleased(t, m, "", 5)
	clock.add(time.Hour) // the record of stream 0 is old now, and still waits
	wantReleased(t, m, "while stream 1 is paused and empty")
	now := clock.now().UnixMilli()
	m.Push(0, []*kgo.Record{rec(now, 1)}, 0)
	m.Paused[1] = false // resumed
	wantReleased(t, m, "after the resume (the old record only)", 10)
	clock.add(h)
	wantReleased(t, m, "", now)
}

// TestHoldZeroIsNone: a zero hold releases as a merge without one.
func TestHoldZeroIsNone(t *testing.T) {
	m, _ := heldMerge(2, 0)
	m.Push(0, []*kgo.Record{rec(10, 0), rec(20, 1)}, 0)
	wantReleased(t, m, "", 10, 20)
}

// TestHoldReadyAgreesWithPop: on random pushes, pauses and clock steps,
// Ready counts exactly the records Pop releases before it waits, and
// every record is released in the end.
func TestHoldReadyAgreesWithPop(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, h = 3, time.Second
	var expired int64
	for trial := range 300 {
		m, clock := heldMerge(n, h)
		var at [n]int64
		var offs [n]int64
		total, released := 0, 0
		for step := range 200 {
			s := rng.IntN(n)
			switch rng.IntN(5) {
			case 0, 1:
				k := rng.IntN(4)
				var recs []*kgo.Record
				// Some records older than the hold, most younger.
				at[s] = max(at[s], clock.now().UnixMilli()-int64(rng.IntN(1500)))
				for range k {
					at[s] += int64(rng.IntN(3))
					recs = append(recs, rec(at[s], offs[s]))
					offs[s]++
				}
				more := int64(0)
				if rng.IntN(4) == 0 {
					more = 1
				}
				m.Push(s, recs, more)
				total += k
			case 2:
				m.Paused[s] = !m.Paused[s] && len(m.Queue[s]) != 0
			case 3:
				clock.add(time.Duration(rng.IntN(600)) * time.Millisecond)
			}
			ready := m.Ready()
			got := 0
			for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
				got++
			}
			if got != ready {
				t.Fatalf("trial %d step %d: Ready %d, Pop released %d", trial, step, ready, got)
			}
			released += got
		}
		// The end: no stream has more, none is paused, and the holds run
		// out.
		for s := range n {
			m.Paused[s] = false
			if m.More[s] {
				m.Push(s, nil, 0)
			}
		}
		released += len(popAll(t, m))
		clock.add(h)
		for range n {
			released += len(popAll(t, m))
			clock.add(h)
		}
		if released != total {
			t.Fatalf("trial %d: released %d of %d", trial, released, total)
		}
		expired += m.hold.expired
	}
	if expired == 0 {
		t.Fatal("no hold ran out: the trials do not exercise the hold")
	}
}
