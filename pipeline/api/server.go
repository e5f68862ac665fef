package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/web"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/service"
)

// Lagger reports consumer-group lag; a *kadm.Client is one.
type Lagger interface {
	Lag(ctx context.Context, groups ...string) (kadm.DescribedGroupLags, error)
}

// ClickHouse error codes the server explains to operators.
const (
	codeUnknownTable    = 60
	codeUnknownDatabase = 81
)

// DefaultJoinerGroup is the consumer group of the joiner.
const DefaultJoinerGroup = "driftline-joiner"

// Options configures a Server. DB or ReadModel is required.
type Options struct {
	// DB reads the ClickHouse read model; a clickhouse-go driver.Conn is
	// one. Required unless ReadModel is set.
	DB reader.DB
	// ReadModel answers the handlers' reads. Default: a *reader.Reader
	// over DB that counts failed queries in the server's metrics.
	ReadModel ReadModel
	// Lag asks the broker for consumer lag. Default nil: the status
	// reports lag as not configured.
	Lag Lagger
	// LagGroups are the consumer groups whose lag the status reports.
	// Default: DefaultJoinerGroup.
	LagGroups []string
	// QueryTimeout bounds the ClickHouse work of one request. Default 10s.
	QueryTimeout time.Duration
	// LagTimeout bounds asking the broker for lag; past it the lag is
	// reported unknown and the rest of the status is still served.
	// Default 3s.
	LagTimeout time.Duration
	// Registry collects the server's metrics and is served on /metrics.
	// Default: a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Logger logs failed queries. Default slog.Default().
	Logger *slog.Logger
	// Now is the wall clock, for watermark age and the age filter.
	// Default time.Now.
	Now func() time.Time
	// WaitConsumer is the consumer_progress.consumer whose watermark
	// wait_watermark awaits. Default: DefaultJoinerGroup.
	WaitConsumer string
	// WaitPartitions is the least number of partitions that must report
	// before a wait can end; set it to the joiner's partition count so a
	// partition that never reported cannot be skipped. Default 1.
	WaitPartitions int
	// MaxWait bounds wait_timeout. Default 30s.
	MaxWait time.Duration
	// Commands receives accepted operator actions (a producer to
	// Topics.Commands, acks=all). Default nil: the action endpoints
	// answer 503.
	Commands CommandLog
	// Actions keeps the answers to actions by Idempotency-Key, shared by
	// every replica (reader.ActionLog). Default nil: the action endpoints
	// answer 503.
	Actions ActionLog
	// Topics names the commands topic. Default contract.DefaultTopics().
	Topics contract.Topics
	// Environment is stamped on every command; the joiner rejects another.
	// Default local_parity.
	Environment string
}

func (o *Options) setDefaults() error {
	if o.DB == nil && o.ReadModel == nil {
		return errors.New("api: Options.DB or Options.ReadModel is required")
	}
	if len(o.LagGroups) == 0 {
		o.LagGroups = []string{DefaultJoinerGroup}
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 10 * time.Second
	}
	if o.LagTimeout <= 0 {
		o.LagTimeout = 3 * time.Second
	}
	if o.Registry == nil {
		o.Registry = service.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.WaitConsumer == "" {
		o.WaitConsumer = DefaultJoinerGroup
	}
	if o.WaitPartitions <= 0 {
		o.WaitPartitions = 1
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 30 * time.Second
	}
	if o.Topics.Commands == "" {
		o.Topics = contract.DefaultTopics()
	}
	if o.Environment == "" {
		o.Environment = contract.EnvLocalParity
	}
	return nil
}

// Server answers the query API.
type Server struct {
	opts        Options
	read        ReadModel
	actionReads ActionReader
	metrics     *metrics
}

// New returns a Server; it fails only on invalid options.
func New(opts Options) (*Server, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	m := newMetrics()
	if err := m.register(opts.Registry); err != nil {
		return nil, err
	}
	read := opts.ReadModel
	if read == nil {
		read = reader.New(opts.DB, reader.Options{Failed: func(q string) { m.chErrors.WithLabelValues(q).Inc() }})
	}
	s := &Server{opts: opts, read: read, metrics: m}
	if ar, ok := read.(ActionReader); ok {
		s.actionReads = ar
	} else {
		s.actionReads = noActionReads{}
	}
	return s, nil
}

// Handler returns the HTTP handler of every endpoint.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.route(mux, "GET /v1/status", "status", s.handleStatus)
	s.route(mux, "GET /v1/drift", "drift", s.handleDrift)
	// The evidence_id holds ':' and '/' ("missing_provider_resource:maas/n1");
	// the trailing wildcard takes the rest of the path, escaped or not.
	s.route(mux, "GET /v1/drift/{evidence_id...}", "drift_detail", s.handleDriftDetail)
	s.route(mux, "GET /v1/heatmap", "heatmap", s.handleHeatmap)
	s.route(mux, "GET /v1/attention", "attention", s.handleAttention)
	s.route(mux, "GET /v1/connectivity", "connectivity", s.handleConnectivity)
	s.route(mux, "GET /v1/nodes", "nodes", s.handleNodes)
	s.route(mux, "GET /v1/nodes/{node_id}", "node_detail", s.handleNodeDetail)
	s.route(mux, "GET /v1/billing/mismatches", "billing_mismatches", s.handleBillingMismatches)
	s.route(mux, "GET /v1/billing/rated", "billing_rated", s.handleRated)
	s.route(mux, "GET /v1/billing/automation", "billing_automation", s.handleAutomation)
	s.route(mux, "GET /v1/billing/conservation", "billing_conservation", s.handleConservation)
	s.route(mux, "GET /v1/bundle", "bundle", s.handleBundle)
	s.route(mux, "POST /v1/findings/{evidence_id...}", "action", s.routeAction)
	s.route(mux, "POST /v1/actions/batch", "batch_action", s.handleBatchAction)
	s.route(mux, "GET /healthz", "healthz", s.handleHealthz)
	mux.Handle("GET /ui/", web.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	s.route(mux, "/", "not_found", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusNotFound, apitypes.ErrorBody{Error: "no such endpoint: " + r.URL.Path})
		return nil
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{Registry: s.opts.Registry}))
	return mux
}

// handlerFunc is an endpoint. It writes its own success answer; a returned
// error is answered by route: 400 for a *ParamError, 503 for the rest.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) route(mux *http.ServeMux, pattern, endpoint string, h handlerFunc) {
	requests := s.metrics.requests.MustCurryWith(prometheus.Labels{"endpoint": endpoint})
	latency := s.metrics.latency.WithLabelValues(endpoint)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		err := s.wait(r)
		if err == nil {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.QueryTimeout)
			defer cancel()
			err = h(rec, r.WithContext(ctx))
		}
		if err != nil {
			s.writeError(rec, r, endpoint, err)
		}
		latency.Observe(time.Since(start).Seconds())
		requests.WithLabelValues(strconv.Itoa(rec.code)).Inc()
	})
}

// wait serves wait_watermark before the endpoint runs; the wait has its
// own bound, outside the endpoint's QueryTimeout.
func (s *Server) wait(r *http.Request) error {
	wm, timeout, err := s.takeWait(r)
	if err != nil || wm.IsZero() {
		return err
	}
	return s.waitWatermark(r.Context(), wm, timeout)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, endpoint string, err error) {
	if pe, ok := errors.AsType[*ParamError](err); ok {
		writeJSON(w, http.StatusBadRequest, pe.body())
		return
	}
	if ae, ok := errors.AsType[*actionError](err); ok {
		writeJSON(w, ae.code, apitypes.ErrorBody{Error: ae.msg, Reason: string(ae.reason)})
		return
	}
	if we, ok := errors.AsType[*WaitTimeoutError](err); ok {
		writeJSON(w, http.StatusGatewayTimeout, apitypes.ErrorBody{Error: we.Error(), Parameter: "wait_watermark"})
		return
	}
	s.opts.Logger.Warn("query failed", "endpoint", endpoint, "url", r.URL.String(), "err", err)
	msg := err.Error()
	if ex, ok := errors.AsType[*clickhouse.Exception](err); ok && (ex.Code == codeUnknownTable || ex.Code == codeUnknownDatabase) {
		msg += "; Possible solutions: start the stack or the joiner, which create the read model, or point -clickhouse.db at the database they write"
	}
	writeJSON(w, http.StatusServiceUnavailable, apitypes.ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away; nothing left to tell it
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) error {
	if err := s.read.Ping(r.Context()); err != nil {
		s.metrics.chErrors.WithLabelValues("ping").Inc()
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "clickhouse ping: " + err.Error()})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// allowOnly refuses any query parameter of q not in names.
func allowOnly(q map[string][]string, names ...string) error {
	for k := range q {
		found := false
		for _, n := range names {
			found = found || k == n
		}
		if !found {
			return &ParamError{Param: k, Reason: "unknown parameter", Allowed: names}
		}
	}
	return nil
}
