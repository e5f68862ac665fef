package joiner

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/stream"
)

// metrics are the joiner's Prometheus series.
type metrics struct {
	stream.StageMetrics
	stream.RoundMetrics

	events         *prometheus.CounterVec // by topic
	invalid        *prometheus.CounterVec // by reason
	duplicates     prometheus.Counter     // redeliveries skipped by dedupe
	conflicts      prometheus.Counter     // repeated identities with other content, quarantined
	mispartitioned *prometheus.CounterVec // by topic
	transitions    *prometheus.CounterVec // by classification, transition
	findingsOpen   *prometheus.GaugeVec   // by partition
	watermark      *prometheus.GaugeVec   // by partition, unix seconds
	flushSeconds   prometheus.Histogram   // one sink write
	flushRows      prometheus.Histogram   // current rows per flush
	flushErrors    prometheus.Counter     // failed sink writes (retried)

	restoreCheckpoints        prometheus.Counter     // restores from a checkpoint
	restoreKept               prometheus.Counter     // partitions reused after a rebalance
	checkpointSnapshotSeconds prometheus.Histogram   // serialising one partition
	checkpointBytes           prometheus.Gauge       // size of the latest checkpoint
	checkpointErrors          prometheus.Counter     // checkpoints not saved or unusable
	late                      prometheus.Counter     // events before the dedupe horizon
	clockSkew                 prometheus.Counter     // events too far ahead of their broker timestamp
	idleAdvances              prometheus.Counter     // watermark markers applied
	paused                    prometheus.Gauge       // streams paused by the throttle
	held                      prometheus.Gauge       // current rows held back while behind
	actions                   *prometheus.CounterVec // operator commands applied live, by action and outcome
	requests                  prometheus.Counter     // requests written to reconcile.requests

	// byTransition holds the series of transitions, looked up once
	// (WithLabelValues hashes its labels on every call): every
	// classification's transitions are exported from the start, at 0.
	byTransition [drift.NumClasses][len(transitionNames)]prometheus.Counter
}

var transitionNames = [...]contract.Transition{contract.TransitionOpened, contract.TransitionUpdated, contract.TransitionResolved, contract.TransitionReopened}

// transition returns the counter of f's transition.
func (m *metrics) transition(f *drift.Finding) prometheus.Counter {
	if t := slices.Index(transitionNames[:], f.Transition); t >= 0 && f.Class < drift.NumClasses {
		return m.byTransition[f.Class][t]
	}
	return m.transitions.WithLabelValues(f.Class.String(), string(f.Transition))
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		StageMetrics: stream.NewStageMetrics("joiner", "joiner"),
		RoundMetrics: stream.NewRoundMetrics("joiner", "joiner"),
		events:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_joiner_events_total", Help: "Events applied, by topic."}, []string{"topic"}),
		invalid:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_joiner_invalid_events_total", Help: "Records that failed validation, by reason."}, []string{"reason"}),
		duplicates:   prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_duplicates_total", Help: "Redelivered events skipped by dedupe."}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_conflicting_duplicates_total",
			Help: "Events that repeat an applied dedupe identity with other content: quarantined as conflicting_duplicate, not applied."}),
		mispartitioned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_joiner_mispartitioned_total", Help: "Records whose key does not hash (murmur2) to the partition they arrived on."}, []string{"topic"}),
		transitions:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_joiner_finding_transitions_total", Help: "Finding transitions, by classification and transition."}, []string{"classification", "transition"}),
		findingsOpen:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_joiner_findings_open", Help: "Open findings, by partition."}, []string{"partition"}),
		watermark:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_joiner_watermark_seconds", Help: "Event-time watermark (unix seconds), by partition."}, []string{"partition"}),
		flushSeconds:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_joiner_flush_seconds", Help: "Latency of one write to ClickHouse.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		flushRows:      prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_joiner_flush_rows", Help: "Current finding rows per flush.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
		flushErrors:    prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_flush_errors_total", Help: "Failed writes to ClickHouse (retried until they succeed)."}),

		restoreCheckpoints:        prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_restore_checkpoints_total", Help: "Partition restores that started from a checkpoint."}),
		restoreKept:               prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_restore_kept_total", Help: "Partitions assigned back after a rebalance and used as they were (nothing committed past them meanwhile)."}),
		checkpointSnapshotSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_joiner_checkpoint_snapshot_seconds", Help: "Time to serialise one partition's state (the poll loop waits for it).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		checkpointBytes:           prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_joiner_checkpoint_bytes", Help: "Size of the latest partition checkpoint."}),
		checkpointErrors:          prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_checkpoint_errors_total", Help: "Checkpoints not saved or not usable (the previous one, or a replay from the start, is used instead)."}),
		late:                      prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_late_events_total", Help: "Events quarantined (reason late_event) because they occurred before the dedupe horizon (watermark - horizon); never applied."}),
		clockSkew:                 prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_clock_skew_events_total", Help: "Events quarantined because their occurred_at is further ahead of their record's broker timestamp than the allowed clock skew (never applied)."}),
		idleAdvances:              prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_idle_watermark_advances_total", Help: "Watermark markers applied to idle partitions."}),
		paused:                    prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_joiner_paused_streams", Help: "Topic partitions not fetched for now: their records wait in the merge for an earlier stream to catch up."}),
		held:                      prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_joiner_held_rows", Help: "Current finding and node-agent rows the partitions hold back while the joiner is behind (-joiner.catchUpHold), as of the last seal: each key's newest, written once it has caught up."}),
		actions:                   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_joiner_actions_total", Help: "Operator commands applied, by action and outcome (applied, or the refusal reason)."}, []string{"action", "outcome"}),
		requests:                  prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_joiner_requests_total", Help: "Requests written to the platform's controllers (reconcile.requests)."}),
	}
	for c := range drift.NumClasses {
		for t, name := range transitionNames {
			m.byTransition[c][t] = m.transitions.WithLabelValues(c.String(), string(name))
		}
	}
	if reg != nil {
		reg.MustRegister(append(append(m.StageMetrics.Collectors(), m.RoundMetrics.Collectors()...),
			m.events, m.invalid, m.duplicates, m.conflicts, m.mispartitioned, m.transitions, m.findingsOpen, m.watermark,
			m.flushSeconds, m.flushRows, m.flushErrors, m.restoreCheckpoints, m.restoreKept,
			m.checkpointSnapshotSeconds, m.checkpointBytes, m.checkpointErrors, m.late, m.clockSkew, m.idleAdvances, m.paused, m.held, m.actions, m.requests)...)
	}
	return m
}
