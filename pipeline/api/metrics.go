package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/service"
)

type metrics struct {
	requests *prometheus.CounterVec   // endpoint, code
	latency  *prometheus.HistogramVec // endpoint
	chErrors *prometheus.CounterVec   // query
	lagErrs  prometheus.Counter
	// waits counts read-your-writes waits by outcome (reached, timeout).
	waits       *prometheus.CounterVec
	waitSeconds prometheus.Histogram
	// waiting counts the requests waiting for their watermark now.
	waiting prometheus.Gauge
	// busy counts requests refused because MaxConcurrent were served.
	busy prometheus.Counter
	// denied counts requests refused by access control, by code (401, 403).
	denied *prometheus.CounterVec
}

// newMetrics declares the series unregistered; register adds them to the
// server's registerer and reports a clash.
func newMetrics() *metrics {
	f := service.NewMetrics(nil)
	return &metrics{
		requests: f.CounterVec("driftline_query_requests_total",
			"Query API requests by endpoint and HTTP status code.", "endpoint", "code"),
		latency: f.HistogramVec("driftline_query_request_duration_seconds",
			"Query API request latency by endpoint.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "endpoint"),
		chErrors: f.CounterVec("driftline_query_clickhouse_errors_total",
			"Failed ClickHouse queries by query name.", "query"),
		lagErrs: f.Counter("driftline_query_lag_errors_total",
			"Status requests whose consumer lag could not be read from the broker."),
		waits: f.CounterVec("driftline_query_watermark_waits_total",
			"Read-your-writes waits (wait_watermark) by outcome: reached or timeout.", "outcome"),
		waitSeconds: f.Histogram("driftline_query_watermark_wait_seconds",
			"Time read-your-writes waits took until the watermark was reached.",
			[]float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}),
		waiting: f.Gauge("driftline_query_watermark_waiting",
			"Requests waiting now for their wait_watermark (read-your-writes): each found it not yet reached and holds its connection until it is or wait_timeout passes."),
		busy: f.Counter("driftline_query_busy_total",
			"Requests answered 503 at once because -query.maxConcurrent requests were being served."),
		denied: f.CounterVec("driftline_query_denied_total",
			"Requests refused by access control, by HTTP status: 401 (no, unknown or revoked key), 403 (role or scope missing).", "code"),
	}
}

// queryNames are names the reader counts failed queries under; each
// starts at zero so a rate over it works from the first scrape.
var queryNames = []string{"drift_list", "drift_detail", "drift_history", "status_counts", "consumer_progress", "heatmap", "ping",
	"attention_findings", "attention_nodes", "connectivity", "nodes", "node_detail", "node_findings",
	"billing_mismatches", "billing_totals", "billing_rated", "bundle", "wait_watermark", "producer_rejections"}

func (m *metrics) register(r prometheus.Registerer) error {
	service.Touch(m.chErrors, queryNames...)
	service.Touch(m.waits, "reached", "timeout")
	service.Touch(m.chErrors, "audit") // GET /v1/audit (audit.go)
	service.Touch(m.denied, "401", "403")
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.chErrors, m.lagErrs, m.waits, m.waitSeconds, m.waiting, m.busy, m.denied} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
