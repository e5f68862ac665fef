package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/web"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream"
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
	// Guard authenticates every request and holds the access policy
	// (package access). Required: access.NewGuard over the keys file, or
	// over keys.LocalKeyring in local_parity.
	Guard *access.Guard
	// Auditor writes audit_log. Default: an auditor appending to
	// audit_log over DB, which must then be able to insert (a
	// clickhouse-go driver.Conn can).
	Auditor *access.Auditor
	// MaxConcurrent bounds the requests served at once; past it a request
	// is answered 503 with Retry-After at once. Default 64.
	MaxConcurrent int
	// MaxExportRows bounds the rows of an export (Arrow, CSV) that gives
	// no limit; the answer then carries Driftline-Export-Row-Cap.
	// Default 1,000,000.
	MaxExportRows int
	// AllowOrigins are the origins whose pages may call the API from a
	// browser (CORS). Default none: only the UI served by this server.
	AllowOrigins []string
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
	// Events reads the records of a node's observations timeline from
	// Kafka (NewKafkaEvents). Default nil: the node page shows the
	// coordinates only, as unavailable.
	Events EventReader
}

// DefaultOptions returns Options with every default written out, for a
// command's flags to start from; the caller sets DB (or ReadModel) and
// Guard.
func DefaultOptions() Options {
	return Options{
		LagGroups:      []string{DefaultJoinerGroup},
		QueryTimeout:   10 * time.Second,
		LagTimeout:     3 * time.Second,
		WaitConsumer:   DefaultJoinerGroup,
		WaitPartitions: 1,
		MaxWait:        30 * time.Second,
		MaxConcurrent:  64,
		MaxExportRows:  1_000_000,
		Topics:         contract.DefaultTopics(),
		Environment:    contract.EnvLocalParity,
	}
}

func (o *Options) setDefaults() error {
	if o.DB == nil && o.ReadModel == nil {
		return errors.New("api: Options.DB or Options.ReadModel is required")
	}
	d := DefaultOptions()
	if len(o.LagGroups) == 0 {
		o.LagGroups = d.LagGroups
	}
	stream.DefaultPositive(&o.QueryTimeout, d.QueryTimeout)
	stream.DefaultPositive(&o.LagTimeout, d.LagTimeout)
	if o.Registry == nil {
		o.Registry = service.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	stream.Default(&o.WaitConsumer, d.WaitConsumer)
	stream.DefaultPositive(&o.WaitPartitions, d.WaitPartitions)
	stream.DefaultPositive(&o.MaxWait, d.MaxWait)
	if o.Guard == nil {
		return errors.New("api: Options.Guard is required; Possible solutions: access.NewGuard over the keys file (or keys.LocalKeyring in local_parity)")
	}
	stream.DefaultPositive(&o.MaxConcurrent, d.MaxConcurrent)
	stream.DefaultPositive(&o.MaxExportRows, d.MaxExportRows)
	if o.Topics.Commands == "" {
		o.Topics = d.Topics
	}
	stream.Default(&o.Environment, d.Environment)
	return nil
}

// Server answers the query API.
type Server struct {
	opts        Options
	read        ReadModel
	actionReads ActionReader
	metrics     *metrics
	auditor     *access.Auditor
	ownsAud     bool          // the auditor is the server's, closed by Close
	slots       chan struct{} // one per request being served (MaxConcurrent)
	idem        keyLocks      // serializes the action requests of one Idempotency-Key
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
	s := &Server{opts: opts, read: read, metrics: m, auditor: opts.Auditor, slots: make(chan struct{}, opts.MaxConcurrent)}
	if s.auditor == nil {
		ins, ok := opts.DB.(access.Inserter)
		if !ok {
			return nil, errors.New("api: Options.Auditor is required when DB cannot insert into audit_log")
		}
		aud, err := access.NewAuditor(access.NewClickHouseSink(ins), access.AuditorOptions{Logger: opts.Logger, Registry: opts.Registry})
		if err != nil {
			return nil, err
		}
		s.auditor, s.ownsAud = aud, true
	}
	if ar, ok := read.(ActionReader); ok {
		s.actionReads = ar
	} else {
		s.actionReads = noActionReads{}
	}
	return s, nil
}

// Close writes the audit entries still queued and stops the server's own
// auditor; call it after the HTTP server has stopped.
func (s *Server) Close() {
	if s.ownsAud {
		s.auditor.Close()
	}
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
	s.route(mux, "GET /v1/nodes/{node_id}/timeline", "node_timeline", s.handleTimeline)
	s.route(mux, "GET /v1/rollouts", "rollouts", s.handleRollouts)
	s.route(mux, "GET /v1/relays", "relays", s.handleRelays)
	s.route(mux, "GET /v1/syncdebt", "syncdebt", s.handleSyncDebt)
	s.route(mux, "GET /v1/billing/mismatches", "billing_mismatches", s.handleBillingMismatches)
	s.route(mux, "GET /v1/billing/rated", "billing_rated", s.handleRated)
	s.route(mux, "GET /v1/billing/automation", "billing_automation", s.handleAutomation)
	s.route(mux, "GET /v1/billing/conservation", "billing_conservation", s.handleConservation)
	s.route(mux, "GET /v1/bundle", "bundle", s.handleBundle)
	s.route(mux, "GET /v1/session", "session", s.handleSession)
	s.route(mux, "GET /v1/audit", "audit", s.handleAudit)
	s.route(mux, "POST /v1/findings/{evidence_id...}", "finding_actions", s.routeAction)
	s.route(mux, "POST /v1/actions/batch", "actions_batch", s.handleBatchAction)
	s.route(mux, "GET /healthz", "healthz", s.handleHealthz)
	mux.Handle("GET /ui/", web.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	s.route(mux, "/", "not_found", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusNotFound, apitypes.ErrorBody{Error: "no such endpoint: " + r.URL.Path})
		return nil
	})
	metricsHandler := promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{Registry: s.opts.Registry})
	s.route(mux, "GET /metrics", "metrics", func(w http.ResponseWriter, r *http.Request) error {
		metricsHandler.ServeHTTP(w, r)
		return nil
	})
	return s.common(mux)
}

// common sets what every answer carries: the policy revision, no
// caching of API answers, and CORS only for the allowed origins (a
// preflight from any other origin gets no CORS headers, so the browser
// refuses the call).
func (s *Server) common(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set(access.HeaderPolicyRev, s.opts.Guard.PolicyRev())
		h.Set("X-Content-Type-Options", "nosniff")
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(s.opts.AllowOrigins, origin) {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Headers", "Authorization, Accept, Content-Type, Idempotency-Key")
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Expose-Headers", access.HeaderPolicyRev+", "+access.HeaderRequestID)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// handlerFunc is an endpoint. It writes its own success answer; a returned
// error is answered by route: 400 for a *ParamError, 503 for the rest.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) route(mux *http.ServeMux, pattern, endpoint string, h handlerFunc) {
	requests := s.metrics.requests.MustCurryWith(prometheus.Labels{"endpoint": endpoint})
	latency := s.metrics.latency.WithLabelValues(endpoint)
	rule := access.RuleOf(endpoint)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			latency.Observe(time.Since(start).Seconds())
			requests.WithLabelValues(strconv.Itoa(rec.code)).Inc()
		}()
		r, ok := s.admit(rec, r, endpoint, rule)
		if !ok {
			return
		}
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			s.metrics.busy.Inc()
			rec.Header().Set("Retry-After", "1")
			writeJSON(rec, http.StatusServiceUnavailable, apitypes.ErrorBody{Error: fmt.Sprintf("busy: %d requests are being served; retry shortly", cap(s.slots)),
				RequestID: requestID(r)})
			return
		}
		err := s.wait(r)
		if err == nil {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.QueryTimeout)
			defer cancel()
			err = h(rec, r.WithContext(ctx))
		}
		if err != nil {
			s.writeError(rec, r, endpoint, err)
		}
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
	msg := s.hideError(r, endpoint, err)
	if ex, ok := errors.AsType[*clickhouse.Exception](err); ok && (ex.Code == codeUnknownTable || ex.Code == codeUnknownDatabase) {
		msg += "; Possible solutions: start the stack or the joiner, which create the read model, or point -clickhouse.db at the database they write"
	}
	writeJSON(w, http.StatusServiceUnavailable, apitypes.ErrorBody{Error: msg, RequestID: requestID(r)})
}

// hideError logs err with the request's id and returns what a client is
// told instead: the id, never ClickHouse's text (which names tables,
// columns and servers).
func (s *Server) hideError(r *http.Request, what string, err error) string {
	id := requestID(r)
	s.opts.Logger.Warn("query failed", "endpoint", what, "request_id", id, "url", r.URL.String(), "err", err)
	return "the read model did not answer; the query service's log has the detail under request_id " + id
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
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": s.hideError(r, "healthz", err)})
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
