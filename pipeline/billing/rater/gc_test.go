package rater

import (
	"runtime/debug"
	"testing"
)

// TuneGC sets the initial percentage of a stage running alone and returns
// the headroom to pace by; GOGC in the environment wins over both.
func TestTuneGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	for _, c := range []struct {
		reconcilerOnly bool
		percent        int
	}{{false, 50}, {true, 25}} {
		t.Setenv("GOGC", "")
		if h := TuneGC(c.reconcilerOnly); h != GCHeadroom {
			t.Errorf("reconcilerOnly %v: headroom %d, want %d", c.reconcilerOnly, h, GCHeadroom)
		}
		if got := debug.SetGCPercent(100); got != c.percent {
			t.Errorf("reconcilerOnly %v: GOGC %d, want %d", c.reconcilerOnly, got, c.percent)
		}
	}
	t.Setenv("GOGC", "80")
	if h := TuneGC(false); h != 0 {
		t.Errorf("with GOGC set: headroom %d, want 0", h)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: TuneGC changed the percentage to %d", got)
	}
}
