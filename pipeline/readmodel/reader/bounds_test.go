package reader

import (
	"math"
	"testing"
	"time"
)

// TestDateBounds: times and dates a DateTime or a Date cannot hold are
// compared as their nearer end; the others as they are.
func TestDateBounds(t *testing.T) {
	for _, c := range []struct {
		at   time.Time
		sec  int64
		date string
	}{
		{time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), 0, "1970-01-01"},
		{time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC), 1795845600, "2026-11-28"},
		{time.Date(2026, 11, 28, 23, 0, 0, 0, time.FixedZone("", -3*3600)), 1795917600, "2026-11-28"}, // the date in its own zone
		{time.Date(2106, 2, 7, 6, 28, 15, 0, time.UTC), math.MaxUint32, "2106-02-07"},
		{time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxUint32, "2149-06-06"},
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), math.MaxUint32, "2149-06-06"},
	} {
		if got := dateTimeSec(c.at); got != c.sec {
			t.Errorf("dateTimeSec(%v) = %d, want %d", c.at, got, c.sec)
		}
		if got := dateOnly(c.at); got != c.date {
			t.Errorf("dateOnly(%v) = %s, want %s", c.at, got, c.date)
		}
	}
}
