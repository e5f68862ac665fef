package stream

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StageMetrics are the series of partition ownership every stage run on
// a Member exports, named driftline_<prefix>_...
type StageMetrics struct {
	Assigned       prometheus.Gauge     // partitions owned
	RestoreSeconds prometheus.Histogram // one assignment's restore
	RestoreEvents  prometheus.Counter   // records replayed by restores
}

// NewStageMetrics returns the series of the stage whose metric names
// begin driftline_<prefix>_; who names it in the help ("joiner").
func NewStageMetrics(prefix, who string) StageMetrics {
	p := "driftline_" + prefix + "_"
	return StageMetrics{
		Assigned: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "partitions_assigned", Help: "Partitions this " + who + " owns."}),
		RestoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: p + "restore_seconds",
			Help: "Time to restore the state of newly assigned partitions.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		RestoreEvents: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "restore_events_total", Help: "Records replayed while restoring partition state."}),
	}
}

// Collectors returns the series, to register.
func (m *StageMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Assigned, m.RestoreSeconds, m.RestoreEvents}
}

// Restored records a restore begun at began, after which owned partitions
// are owned.
func (m *StageMetrics) Restored(owned int, began time.Time) {
	m.Assigned.Set(float64(owned))
	m.RestoreSeconds.Observe(time.Since(began).Seconds())
}

// RoundMetrics are the series of a stage that merges its streams in
// rounds (RoundOptions).
type RoundMetrics struct {
	Pauses        prometheus.Counter // times a stream was paused by the throttle
	Backlog       prometheus.Gauge   // records not applied yet
	CatchUpRounds prometheus.Counter // rounds longer than a regular one
	Late          prometheus.Counter // records applied behind the merge order
	HoldsExpired  prometheus.Counter // live-tail holds that ran out (RoundOptions.LiveHold)
}

// NewRoundMetrics returns the series of the stage whose metric names and
// flags begin with prefix; who names it in the help ("joiner").
func NewRoundMetrics(prefix, who string) RoundMetrics {
	p, f := "driftline_"+prefix+"_", "-"+prefix+"."
	return RoundMetrics{
		Pauses: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "stream_pauses_total",
			Help: "Times a topic partition's fetching was paused because its records waited in the merge (" + f + "queueRecords)."}),
		Backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "backlog_records",
			Help: "Records of the owned partitions not applied yet (queued, or below the end of the log at the last fetch; transaction markers counted)."}),
		CatchUpRounds: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "catch_up_rounds_total",
			Help: "Rounds that ran past " + f + "flushInterval or " + f + "flushEvents because the " + who + " was behind (" + f + "catchUpInterval, " + f + "catchUpEvents)."}),
		Late: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "late_records_total",
			Help: "Records applied after a record of another stream with a later timestamp: they reached the broker after the merge had passed their time (the live tail), or their producer's clock is behind, so a replay applies them earlier and the rows they touched may differ from a replay's."}),
		HoldsExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "live_holds_expired_total",
			Help: "Times the merge of a partition went on without a caught-up stream after holding its release for " + f + "liveHold: a record of that stream still in flight would be applied late."}),
	}
}

// Collectors returns the series, to register.
func (m *RoundMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Pauses, m.Backlog, m.CatchUpRounds, m.Late, m.HoldsExpired}
}
