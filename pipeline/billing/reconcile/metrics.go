package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/stream"
)

type metrics struct {
	stream.StageMetrics
	stream.RoundMetrics
	events         *prometheus.CounterVec
	invalid        *prometheus.CounterVec
	mispartitioned *prometheus.CounterVec
	transitions    *prometheus.CounterVec
	open           *prometheus.GaugeVec
	watermark      *prometheus.GaugeVec
	flushSeconds   prometheus.Histogram
	flushErrors    prometheus.Counter
	trackedUsage   *prometheus.GaugeVec
	trackedWindows *prometheus.GaugeVec
	pruned         prometheus.Counter
	late           prometheus.Counter
	stateMemory    prometheus.Gauge
	spillReads     prometheus.Counter
	spillWrites    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		StageMetrics: stream.NewStageMetrics("billing", "billing reconciler"),
		RoundMetrics: stream.NewRoundMetrics("billing", "reconciler"),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_billing_events_total",
			Help: "Events applied by the billing reconciler, by topic."}, []string{"topic"}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_billing_invalid_total",
			Help: "Records the billing reconciler could not decode, by reason (they are skipped)."}, []string{"reason"}),
		mispartitioned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_billing_mispartitioned_total",
			Help: "Records whose key does not hash to the partition they arrived on, by topic."}, []string{"topic"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_billing_mismatch_transitions_total",
			Help: "billing_mismatch rows written, by kind and status."}, []string{"kind", "status"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_billing_mismatches_open",
			Help: "Open billing mismatches per owned partition."}, []string{"partition"}),
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_billing_watermark_seconds",
			Help: "Event-time watermark per owned partition (Unix seconds)."}, []string{"partition"}),
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_billing_flush_seconds",
			Help: "Time to write one batch to ClickHouse.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		flushErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_flush_errors_total",
			Help: "Failed ClickHouse writes (retried; offsets stay uncommitted)."}),
		trackedUsage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_billing_tracked_usage",
			Help: "usage_ids held in memory per owned partition (settled ones are dropped past the horizon)."}, []string{"partition"}),
		trackedWindows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_billing_tracked_windows",
			Help: "Conservation windows held in memory per owned partition."}, []string{"partition"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_pruned_usage_total",
			Help: "Settled usage_ids dropped from memory past the horizon (restores excluded)."}),
		late: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_window_late_total",
			Help: "Changes to usage whose conservation window was already closed and dropped (not counted in any window row)."}),
		stateMemory: prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_billing_state_memory_bytes",
			Help: "Bytes of usage states and their strings in memory when they spill (-billing.stateMemory); the rest is in scratch files."}),
		spillReads: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_state_spill_reads_total",
			Help: "Chunks of usage states or strings read back from the scratch files."}),
		spillWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_state_spill_writes_total",
			Help: "Chunks of usage states or strings written to the scratch files."}),
	}
	if reg != nil {
		reg.MustRegister(append(append(m.StageMetrics.Collectors(), m.RoundMetrics.Collectors()...),
			m.events, m.invalid, m.mispartitioned, m.transitions, m.open, m.watermark,
			m.flushSeconds, m.flushErrors, m.trackedUsage, m.trackedWindows, m.pruned, m.late,
			m.stateMemory, m.spillReads, m.spillWrites)...)
	}
	return m
}
