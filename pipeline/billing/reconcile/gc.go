package reconcile

import (
	"runtime/debug"
	rtmetrics "runtime/metrics"
)

// gcTuner paces the collector of a process that runs the reconciler
// alone (Options.GCHeadroom). Between two collections the heap grows by
// GOGC percent of the live heap, and the runtime keeps what it freed
// mapped until the heap shrinks well below its goal, so the process's
// RSS is about the live heap times 1 + GOGC/100 and a little more. The
// reconciler's live heap is mostly its usage states and their strings,
// which hold no pointers and cost a collection almost nothing to mark:
// what a collection costs is its rounds' rows and records, the same at
// any number of usage_ids. So the headroom is held near a fixed number
// of bytes, as a percentage of the live heap between 10 (millions of
// usage_ids: 10% of a GiB) and 25 (a small state, where 25% is a few
// tens of MB and a tighter one would only collect more often).
type gcTuner struct {
	headroom uint64 // bytes; 0: leave the collector alone
	percent  int    // the percentage set last; 0: none yet
	sample   []rtmetrics.Sample
}

// Percentages the tuner sets the collector's GOGC between.
const (
	minGCPercent = 10
	maxGCPercent = 25
)

// gcPercent returns the GOGC percentage that gives a live heap of live
// bytes about headroom bytes to grow.
func gcPercent(headroom, live uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	return int(min(max(100*headroom/live, minGCPercent), maxGCPercent))
}

// round sets the collector's percentage from the live heap measured by
// the last collection; it is called after each round's write.
func (g *gcTuner) round() {
	if g.headroom == 0 {
		return
	}
	if g.sample == nil {
		g.sample = []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	}
	rtmetrics.Read(g.sample)
	if g.sample[0].Value.Kind() != rtmetrics.KindUint64 {
		return
	}
	if p := gcPercent(g.headroom, g.sample[0].Value.Uint64()); p != g.percent {
		debug.SetGCPercent(p)
		g.percent = p
	}
}
