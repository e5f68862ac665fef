package ingest

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/driftline/driftline/pipeline/contract"
)

// metrics are the gateway's Prometheus series. Label values are bounded:
// topics are configuration, reasons are contract.Reasons.
type metrics struct {
	accepted       *prometheus.CounterVec // events acknowledged by the broker, by topic
	rejected       *prometheus.CounterVec // lines quarantined, by reason
	duplicates     prometheus.Counter     // lines answered duplicate
	produceErrors  *prometheus.CounterVec // records the broker did not take, by topic
	authFailures   *prometheus.CounterVec // 401 answers, by kind
	requests       *prometheus.HistogramVec
	busy           prometheus.Counter // requests refused because MaxInflight was reached
	inflight       prometheus.Gauge
	dedupeEntries  prometheus.GaugeFunc
	unavailable    prometheus.Counter // 503 answers because the broker could not take the write
	bodyTooLarge   prometheus.Counter
	quarantineSize prometheus.Counter // bytes of rejected lines dropped by truncation
	inflightBytes  prometheus.GaugeFunc
	draining       prometheus.Counter     // requests refused because the gateway is shutting down
	reloads        *prometheus.CounterVec // SetKeys outcomes: applied, unchanged, refused
	policyInfo     *prometheus.GaugeVec   // 1 for the policy_rev in force
}

// setPolicy moves the policy info series from old to rev.
func (m *metrics) setPolicy(old, rev string) {
	if old != "" {
		m.policyInfo.DeleteLabelValues(old)
	}
	m.policyInfo.WithLabelValues(rev).Set(1)
}

func newMetrics(reg prometheus.Registerer, topics []string, dedupeLen, inflightBytes func() float64) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		accepted: f.NewCounterVec(prometheus.CounterOpts{
			Name: "driftline_ingest_events_accepted_total",
			Help: "Events written to their topic and acknowledged by the broker (a fanned-out scan marker counts once).",
		}, []string{"topic"}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "driftline_ingest_events_rejected_total",
			Help: "Lines rejected and written to the quarantine topic, by reason code.",
		}, []string{"reason"}),
		duplicates: f.NewCounter(prometheus.CounterOpts{
			Name: "driftline_ingest_events_duplicate_total",
			Help: "Lines whose dedupe identity this gateway had already accepted; not written again.",
		}),
		produceErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "driftline_ingest_produce_errors_total",
			Help: "Records the broker did not acknowledge in time or refused.",
		}, []string{"topic"}),
		authFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "driftline_ingest_auth_failures_total",
			Help: "Requests answered 401, by kind (missing, unknown, revoked: API key or client certificate identity). Each is also an audit log line.",
		}, []string{"kind"}),
		requests: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "driftline_ingest_request_duration_seconds",
			Help:    "Latency of POST /v1/events from the first byte read to the answer, by HTTP status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"code"}),
		busy: f.NewCounter(prometheus.CounterOpts{
			Name: "driftline_ingest_requests_busy_total",
			Help: "Requests refused with 503 because the in-flight limit was reached; raise -ingest.maxInflight or add gateways.",
		}),
		inflight: f.NewGauge(prometheus.GaugeOpts{
			Name: "driftline_ingest_requests_inflight",
			Help: "Requests being processed.",
		}),
		dedupeEntries: f.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "driftline_ingest_dedupe_entries",
			Help: "Dedupe identities held by the recent-set.",
		}, dedupeLen),
		unavailable: f.NewCounter(prometheus.CounterOpts{
			Name: "driftline_ingest_requests_unavailable_total",
			Help: "Requests answered 503 because the broker could not take the write.",
		}),
		bodyTooLarge: f.NewCounter(prometheus.CounterOpts{
			Name: "driftline_ingest_requests_too_large_total",
			Help: "Requests answered 413 because the body exceeded the limit.",
		}),
		quarantineSize: f.NewCounter(prometheus.CounterOpts{
			Name: "driftline_ingest_quarantine_truncated_bytes_total",
			Help: "Bytes of rejected lines not copied into quarantine records because of the line limit.",
		}),
		inflightBytes: f.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "driftline_ingest_inflight_body_bytes",
			Help: "Request body bytes reserved by requests in flight; at -ingest.maxInflightBytes new requests answer 503 busy.",
		}, inflightBytes),
		draining: f.NewCounter(prometheus.CounterOpts{
			Name: "driftline_ingest_requests_draining_total",
			Help: "Requests refused with 503 because the gateway was shutting down.",
		}),
		reloads: f.NewCounterVec(prometheus.CounterOpts{
			Name: "driftline_ingest_policy_reloads_total",
			Help: "Keys file reloads by result: applied (new policy_rev), unchanged, refused (the previous policy stays in force).",
		}, []string{"result"}),
		policyInfo: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "driftline_ingest_policy_info",
			Help: "1 for the policy_rev in force.",
		}, []string{"policy_rev"}),
	}
	for _, r := range []string{"applied", "unchanged", "refused"} {
		m.reloads.WithLabelValues(r)
	}
	// Pre-create series so dashboards see zeros rather than gaps.
	for _, t := range topics {
		m.accepted.WithLabelValues(t)
		m.produceErrors.WithLabelValues(t)
	}
	for _, r := range contract.Reasons {
		m.rejected.WithLabelValues(string(r))
	}
	for _, k := range []string{"missing", "unknown", "revoked"} {
		m.authFailures.WithLabelValues(k)
	}
	return m
}
