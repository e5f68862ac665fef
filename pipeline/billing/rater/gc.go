package rater

import (
	"os"
	"runtime/debug"
)

// TuneGC sets the collector of a process that runs the rater or the
// billing reconciler alone (reconcilerOnly), unless GOGC is set. The
// rater's heap is mostly its usage keys, arenas without pointers that a
// collection does not scan: collecting at half the live heap instead of
// all of it costs little CPU and keeps its RSS nearer the keys' size
// (docs/sizing.md). The reconciler alone goes further: its usage states
// and their strings are pointer-free too (a slab and an arena), so a
// collection marks little more than the round's records and rows, and a
// quarter of the live heap as headroom bounds its RSS at 1.25 times its
// state. Both in one process keep Go's default.
func TuneGC(reconcilerOnly bool) {
	if os.Getenv("GOGC") != "" {
		return
	}
	gc := 50
	if reconcilerOnly {
		gc = 25
	}
	debug.SetGCPercent(gc)
}
