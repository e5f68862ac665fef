package rater

import "github.com/prometheus/client_golang/prometheus"

// metrics are the rater's Prometheus series.
type metrics struct {
	usage          *prometheus.CounterVec // by outcome: rated, quarantined, redelivery
	quarantined    *prometheus.CounterVec // by reason
	mispartitioned prometheus.Counter     // usage whose key does not hash to its partition
	txns           *prometheus.CounterVec // by result: committed, aborted
	batchSeconds   prometheus.Histogram   // one poll-rate-produce-commit round
	batchEvents    prometheus.Histogram   // records per round
	restoreSeconds prometheus.Histogram   // one assignment's restore
	restoreEvents  prometheus.Counter     // usage events replayed by restores
	keys           prometheus.Gauge       // usage keys remembered
	assigned       prometheus.Gauge       // partitions owned
	bookReloads    *prometheus.CounterVec // by result: applied, refused
	bookUnits      prometheus.Gauge       // unit ids in the book in use
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		usage:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_usage_total", Help: "Usage records consumed, by outcome (rated, quarantined, redelivery); counted when their transaction commits."}, []string{"outcome"}),
		quarantined:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_quarantined_total", Help: "Usage records written to the quarantine topic instead of being rated, by reason."}, []string{"reason"}),
		mispartitioned: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_rater_mispartitioned_total", Help: "Usage records whose key does not hash (murmur2) to the partition they arrived on; rated under the partition of their key."}),
		txns:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_transactions_total", Help: "Transactions ended, by result (committed, aborted)."}, []string{"result"}),
		batchSeconds:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_rater_batch_seconds", Help: "Latency of one consume-rate-produce-commit round.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		batchEvents:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_rater_batch_events", Help: "Records per round.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_rater_restore_seconds", Help: "Time to rebuild the usage-key state of newly assigned partitions.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		restoreEvents:  prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_rater_restore_events_total", Help: "Usage records replayed while restoring state."}),
		keys:           prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_rater_usage_keys", Help: "Usage keys remembered for exactly-once rating (memory grows with it)."}),
		assigned:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_rater_partitions_assigned", Help: "Usage partitions this rater owns."}),
		bookReloads:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_pricebook_reloads_total", Help: "Price book reloads, by result (applied, refused); a refused file leaves the previous book in use."}, []string{"result"}),
		bookUnits:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_rater_pricebook_units", Help: "Unit ids in the price book in use."}),
	}
	if reg != nil {
		reg.MustRegister(m.usage, m.quarantined, m.mispartitioned, m.txns, m.batchSeconds, m.batchEvents,
			m.restoreSeconds, m.restoreEvents, m.keys, m.assigned, m.bookReloads, m.bookUnits)
	}
	return m
}
