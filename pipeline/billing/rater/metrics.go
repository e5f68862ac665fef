package rater

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/stream"
)

// metrics are the rater's Prometheus series.
type metrics struct {
	stream.StageMetrics
	usage          *prometheus.CounterVec // by outcome: rated, quarantined, redelivery
	quarantined    *prometheus.CounterVec // by reason
	mispartitioned prometheus.Counter     // usage whose key does not hash to its partition
	txns           *prometheus.CounterVec // by result: committed, aborted
	batchSeconds   prometheus.Histogram   // one poll-rate-produce-commit round
	batchEvents    prometheus.Histogram   // records per round
	keys           prometheus.Gauge       // usage keys remembered
	keyBytes       prometheus.Gauge       // memory they hold
	bookReloads    *prometheus.CounterVec // by result: applied, refused
	bookUnits      prometheus.Gauge       // unit ids in the book in use
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		StageMetrics:   stream.NewStageMetrics("rater", "rater"),
		usage:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_usage_total", Help: "Usage records consumed, by outcome (rated, quarantined, redelivery, rerouted: copied to the partition of their usage key, where they are rated); counted when their transaction commits."}, []string{"outcome"}),
		quarantined:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_quarantined_total", Help: "Usage records written to the quarantine topic instead of being rated, by reason."}, []string{"reason"}),
		mispartitioned: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_rater_mispartitioned_total", Help: "Usage records whose usage key does not hash (murmur2) to the partition they arrived on, or whose record key is not their usage key; those on another partition are rerouted (a copy to the partition of their key, where they are rated)."}),
		txns:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_transactions_total", Help: "Transactions ended, by result (committed, aborted)."}, []string{"result"}),
		batchSeconds:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_rater_batch_seconds", Help: "Latency of one consume-rate-produce-commit round.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		batchEvents:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_rater_batch_events", Help: "Records per round.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
		keys:           prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_rater_usage_keys", Help: "Usage keys remembered for exactly-once rating, within the horizon (memory grows with it)."}),
		keyBytes:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_rater_usage_key_bytes", Help: "Memory the usage keys remembered hold (arena and index), approximately."}),
		bookReloads:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_rater_pricebook_reloads_total", Help: "Price book reloads, by result (applied, refused); a refused file leaves the previous book in use."}, []string{"result"}),
		bookUnits:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "driftline_rater_pricebook_units", Help: "Unit ids in the price book in use."}),
	}
	if reg != nil {
		reg.MustRegister(append(m.StageMetrics.Collectors(), m.usage, m.quarantined, m.mispartitioned, m.txns,
			m.batchSeconds, m.batchEvents, m.keys, m.keyBytes, m.bookReloads, m.bookUnits)...)
	}
	return m
}
