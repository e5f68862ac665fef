package ingest

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/service"
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
	f := service.NewMetrics(reg)
	m := &metrics{
		accepted: f.CounterVec("driftline_ingest_events_accepted_total",
			"Events written to their topic and acknowledged by the broker (a fanned-out scan marker counts once).", "topic"),
		rejected: f.CounterVec("driftline_ingest_events_rejected_total",
			"Lines rejected and written to the quarantine topic, by reason code.", "reason"),
		duplicates: f.Counter("driftline_ingest_events_duplicate_total",
			"Lines whose dedupe identity this gateway had already accepted; not written again."),
		produceErrors: f.CounterVec("driftline_ingest_produce_errors_total",
			"Records the broker did not acknowledge in time or refused.", "topic"),
		authFailures: f.CounterVec("driftline_ingest_auth_failures_total",
			"Requests answered 401, by kind (missing, unknown, revoked: API key or client certificate identity). Each is also an audit log line.", "kind"),
		requests: f.HistogramVec("driftline_ingest_request_duration_seconds",
			"Latency of POST /v1/events from the first byte read to the answer, by HTTP status.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "code"),
		busy: f.Counter("driftline_ingest_requests_busy_total",
			"Requests refused with 503 because the in-flight limit was reached; raise -ingest.maxInflight or add gateways."),
		inflight: f.Gauge("driftline_ingest_requests_inflight",
			"Requests being processed."),
		dedupeEntries: f.GaugeFunc("driftline_ingest_dedupe_entries",
			"Dedupe identities held by the recent-set.", dedupeLen),
		unavailable: f.Counter("driftline_ingest_requests_unavailable_total",
			"Requests answered 503 because the broker could not take the write."),
		bodyTooLarge: f.Counter("driftline_ingest_requests_too_large_total",
			"Requests answered 413 because the body exceeded the limit."),
		quarantineSize: f.Counter("driftline_ingest_quarantine_truncated_bytes_total",
			"Bytes of rejected lines not copied into quarantine records because of the line limit."),
		inflightBytes: f.GaugeFunc("driftline_ingest_inflight_body_bytes",
			"Request body bytes reserved by requests in flight; at -ingest.maxInflightBytes new requests answer 503 busy.", inflightBytes),
		draining: f.Counter("driftline_ingest_requests_draining_total",
			"Requests refused with 503 because the gateway was shutting down."),
		reloads: f.CounterVec("driftline_ingest_policy_reloads_total",
			"Keys file reloads by result: applied (new policy_rev), unchanged, refused (the previous policy stays in force).", "result"),
		policyInfo: f.GaugeVec("driftline_ingest_policy_info",
			"1 for the policy_rev in force.", "policy_rev"),
	}
	// Pre-create series so dashboards see zeros rather than gaps.
	service.Touch(m.reloads, "applied", "unchanged", "refused")
	service.Touch(m.accepted, topics...)
	service.Touch(m.produceErrors, topics...)
	service.Touch(m.rejected, contract.Strings(contract.Reasons)...)
	service.Touch(m.rejected, string(contract.ReasonClockSkew))
	service.Touch(m.authFailures, "missing", "unknown", "revoked")
	return m
}
