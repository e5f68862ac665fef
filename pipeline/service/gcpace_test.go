package service

import (
	"runtime/debug"
	"testing"
)

func TestGCPercentHoldsTheHeadroom(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 25}, {100 * mib, 25}, {512 * mib, 25}, {640 * mib, 20}, {1024 * mib, 12}, {1280 * mib, 10}, {4096 * mib, 10},
	} {
		if got := (&GCPacer{Headroom: 128 * mib}).Percent(c.live); got != c.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", c.live/mib, got, c.want)
		}
	}
}

// A pacer's own bounds replace the package's: the joiner's keeps 25-50%.
func TestGCPacerBounds(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 50}, {256 * mib, 50}, {512 * mib, 50}, {640 * mib, 40}, {1024 * mib, 25}, {4096 * mib, 25},
	} {
		g := GCPacer{Headroom: 256 * mib, Min: 25, Max: 50}
		if got := g.Percent(c.live); got != c.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", c.live/mib, got, c.want)
		}
	}
	if lo, hi := (&GCPacer{Min: 30, Max: 20}).bounds(); lo != 30 || hi != 30 {
		t.Errorf("Min above Max: bounds %d-%d, want 30-30", lo, hi)
	}
}

// A pacer with headroom sets the collector's percentage after a round; a
// zero one leaves it alone.
func TestGCPacerSetsThePercentage(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	var off GCPacer
	off.AfterRound()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("a pacer without headroom set GOGC %d", got)
	}
	p := GCPacer{Headroom: 1 << 40} // far above any live heap here: the largest percentage
	p.AfterRound()
	if got := debug.SetGCPercent(100); got != MaxGCPercent {
		t.Fatalf("GOGC %d after a round, want %d", got, MaxGCPercent)
	}
}
