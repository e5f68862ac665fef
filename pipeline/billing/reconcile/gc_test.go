package reconcile

import "testing"

func TestGCPercentHoldsTheHeadroom(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 25}, {100 * mib, 25}, {512 * mib, 25}, {640 * mib, 20}, {1024 * mib, 12}, {1280 * mib, 10}, {4096 * mib, 10},
	} {
		if got := gcPercent(128*mib, c.live); got != c.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", c.live/mib, got, c.want)
		}
	}
}
