package reconcile

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	pauses         prometheus.Counter
	backlog        prometheus.Gauge
	catchUpRounds  prometheus.Counter
	events         *prometheus.CounterVec
	invalid        *prometheus.CounterVec
	mispartitioned *prometheus.CounterVec
	transitions    *prometheus.CounterVec
	open           *prometheus.GaugeVec
	watermark      *prometheus.GaugeVec
	assigned       prometheus.Gauge
	flushSeconds   prometheus.Histogram
	flushErrors    prometheus.Counter
	restoreSeconds prometheus.Histogram
	restoreEvents  prometheus.Counter
	trackedUsage   *prometheus.GaugeVec
	trackedWindows *prometheus.GaugeVec
	pruned         prometheus.Counter
	late           prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
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
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_billing_partitions_assigned",
			Help: "Partitions this billing reconciler owns."}),
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_billing_flush_seconds",
			Help: "Time to write one batch to ClickHouse.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		flushErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_flush_errors_total",
			Help: "Failed ClickHouse writes (retried; offsets stay uncommitted)."}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_billing_restore_seconds",
			Help: "Time to restore newly assigned partitions.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		restoreEvents: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_restore_events_total",
			Help: "Events replayed to restore partition state."}),
		trackedUsage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_billing_tracked_usage",
			Help: "usage_ids held in memory per owned partition (settled ones are dropped past the horizon)."}, []string{"partition"}),
		trackedWindows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driftline_billing_tracked_windows",
			Help: "Conservation windows held in memory per owned partition."}, []string{"partition"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_pruned_usage_total",
			Help: "Settled usage_ids dropped from memory past the horizon (restores excluded)."}),
		pauses: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_stream_pauses_total",
			Help: "Times a topic partition's fetching was paused because its records waited in the merge (-billing.queueRecords)."}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_billing_backlog_records",
			Help: "Records of the owned partitions not applied yet (queued, or below the end of the log at the last fetch; transaction markers counted)."}),
		catchUpRounds: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_catch_up_rounds_total",
			Help: "Rounds that ran past -billing.flushInterval or the round's event bound because the reconciler was behind (-billing.catchUpInterval)."}),
		late: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_billing_window_late_total",
			Help: "Changes to usage whose conservation window was already closed and dropped (not counted in any window row)."}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.invalid, m.mispartitioned, m.transitions, m.open, m.watermark, m.assigned,
			m.flushSeconds, m.flushErrors, m.restoreSeconds, m.restoreEvents,
			m.trackedUsage, m.trackedWindows, m.pruned, m.late, m.pauses, m.backlog, m.catchUpRounds)
	}
	return m
}
