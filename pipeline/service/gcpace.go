package service

import (
	"runtime/debug"
	rtmetrics "runtime/metrics"
)

// GCPacer paces the collector of a process whose live heap is mostly
// pointer-free state (the rater's usage keys, the billing reconciler's
// usage states): call AfterRound after each round's write.
//
// Between two collections the heap grows by GOGC percent of the live
// heap, and the runtime keeps what it freed mapped until the heap shrinks
// well below its goal, so the process's RSS is about the live heap times
// 1 + GOGC/100 and a little more. State without pointers costs a
// collection almost nothing to mark: what a collection costs is the
// rounds' records and rows, the same at any size of state. So the pacer
// holds the headroom near a fixed number of bytes, as a percentage of the
// live heap between MinGCPercent (a large state: 10% of a GiB) and
// MaxGCPercent (a small one, where 25% is a few tens of MB and a tighter
// one would only collect more often), or between Min and Max when set.
type GCPacer struct {
	// Headroom is the bytes the heap may grow past the live heap between
	// two collections; 0 leaves the collector alone.
	Headroom uint64
	// Min and Max bound the percentage; 0 takes MinGCPercent and
	// MaxGCPercent.
	Min, Max int
	percent  int // the percentage set last; 0: none yet
	sample   []rtmetrics.Sample
}

// The percentages a GCPacer sets the collector's GOGC between.
const (
	MinGCPercent = 10
	MaxGCPercent = 25
)

// bounds returns the percentages g sets the collector between.
func (g *GCPacer) bounds() (lo, hi int) {
	lo, hi = g.Min, g.Max
	if lo <= 0 {
		lo = MinGCPercent
	}
	if hi <= 0 {
		hi = MaxGCPercent
	}
	return lo, max(lo, hi)
}

// Percent returns the GOGC percentage that gives a live heap of live
// bytes about Headroom bytes to grow, within g's bounds.
func (g *GCPacer) Percent(live uint64) int {
	lo, hi := g.bounds()
	if live == 0 {
		return hi
	}
	return int(min(max(100*g.Headroom/live, uint64(lo)), uint64(hi)))
}

// AfterRound sets the collector's percentage from the live heap the last
// collection measured.
func (g *GCPacer) AfterRound() {
	if g == nil || g.Headroom == 0 {
		return
	}
	if g.sample == nil {
		g.sample = []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	}
	rtmetrics.Read(g.sample)
	if g.sample[0].Value.Kind() != rtmetrics.KindUint64 {
		return
	}
	if p := g.Percent(g.sample[0].Value.Uint64()); p != g.percent {
		debug.SetGCPercent(p)
		g.percent = p
	}
}
