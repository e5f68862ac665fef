package rater

import (
	"os"
	"runtime/debug"
)

// GCHeadroom is the Options.GCHeadroom (and the billing reconciler's) of
// a process that runs the rater or the reconciler alone: what its heap
// may grow past the live heap between two collections.
const GCHeadroom = 128 << 20

// TuneGC sets the collector of a process that runs the rater or the
// billing reconciler alone (reconcilerOnly), unless GOGC is set, and
// returns the headroom to pace it by after each round (GCHeadroom; 0 when
// GOGC is set). The heap of either is mostly state without pointers
// (usage keys in arenas; the reconciler's usage states in a slab and an
// arena), which a collection does not scan: so a collection costs little
// more than marking a round's records and rows, and a heap held near the
// live one bounds the process's RSS near its state (docs/sizing.md). The
// initial percentage (50 for the rater, 25 for the reconciler) holds
// until the first round ends. Both in one process keep Go's default.
func TuneGC(reconcilerOnly bool) (headroom uint64) {
	if os.Getenv("GOGC") != "" {
		return 0
	}
	gc := 50
	if reconcilerOnly {
		gc = 25
	}
	debug.SetGCPercent(gc)
	return GCHeadroom
}
