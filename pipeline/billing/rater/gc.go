package rater

import (
	"os"
	"runtime/debug"
)

// TuneGC sets the collector of a process that runs the rater or the
// billing reconciler alone to collect at half the live heap, unless GOGC
// is set. The rater's heap is mostly its usage keys, arenas without
// pointers that a collection does not scan: collecting at half the live
// heap instead of all of it costs little CPU and keeps its RSS nearer the
// keys' size (docs/sizing.md). The reconciler alone does the same: its
// heap is mostly its usage states, and half of it as headroom bounds its
// RSS at 1.5 times them instead of twice. Both in one process keep Go's
// default.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
}
