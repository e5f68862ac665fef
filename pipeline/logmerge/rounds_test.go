package logmerge

import (
	"testing"
	"time"
)

func TestRoundsLimits(t *testing.T) {
	r := Rounds{Interval: 500 * time.Millisecond, Records: 100, CatchUpInterval: 3 * time.Second, CatchUpRecords: 1000}
	for _, c := range []struct {
		backlog int64
		d       time.Duration
		n       int
	}{
		{0, 500 * time.Millisecond, 100},
		{100, 500 * time.Millisecond, 100}, // one regular round left
		{101, 3 * time.Second, 100},        // never below a regular round
		{1000, 3 * time.Second, 500},       // half the backlog: the last rounds shrink
		{2000, 3 * time.Second, 1000},      // at most CatchUpRecords
		{1 << 40, 3 * time.Second, 1000},
	} {
		if d, n := r.Limits(c.backlog); d != c.d || n != c.n {
			t.Errorf("backlog %d: %v, %d; want %v, %d", c.backlog, d, n, c.d, c.n)
		}
	}
	// Off when the catch-up interval is not above the regular one; a
	// catch-up round never takes fewer records than a regular one.
	r.CatchUpInterval = r.Interval
	if d, n := r.Limits(1 << 40); d != r.Interval || n != r.Records {
		t.Errorf("catching up while off: %v, %d", d, n)
	}
	r.CatchUpInterval, r.CatchUpRecords = time.Second, 10
	if _, n := r.Limits(1 << 40); n != r.Records {
		t.Errorf("catch-up round of %d records, below the regular %d", n, r.Records)
	}
}
