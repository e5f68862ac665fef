package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

// Gateway is the ingest gateway. Create it with New, serve Handler, and
// Close it after the HTTP server has shut down.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	audit     *slog.Logger // audit trail: authentication refusals, policy changes
	cl        *kgo.Client
	adm       *kadm.Client
	validator contract.Validator
	pol       atomic.Pointer[policy] // the keyring and policy_rev in force; swapped whole by SetKeys
	recent    *recentSet
	sem       chan struct{} // one token per in-flight request
	m         *metrics

	inflightBytes atomic.Int64   // bytes of request bodies reserved by in-flight requests
	draining      atomic.Bool    // set by Drain: refuse new requests, fail /healthz
	handlers      sync.WaitGroup // requests past admission, awaited by Close

	setKeysMu sync.Mutex // setKeysMu serialises SetKeys (check-then-swap of pol)

	partsMu sync.Mutex                // partsMu protects parts
	parts   map[string]partitionCount // topic -> cached partition count
}

type partitionCount struct {
	n  int32
	at time.Time
}

// New validates opts, connects a producer and returns the gateway. It does
// not wait for the broker: a broker that is down makes requests answer 503
// and /healthz fail until it is back.
func New(opts Options) (*Gateway, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("ingest options: %w", err)
	}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(Partitioner()),
		kgo.ProducerLinger(opts.Linger),
		kgo.MaxBufferedRecords(opts.MaxBufferedRecords),
		// Fail records that could not be sent within the request's
		// budget instead of retrying forever behind the answer.
		kgo.RecordDeliveryTimeout(opts.ProduceTimeout),
		// Topics are created at start (or managed elsewhere); a missing
		// topic is a configuration error, not something to create here.
		kgo.UnknownTopicRetries(3),
	}
	kopts = append(kopts, opts.KafkaOpts...)
	// Idempotence and acks=all are what make a 200 mean "written once":
	// refuse extra options that turn them off rather than weaken it.
	kopts = append(kopts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(Partitioner()))
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	if disabled, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); disabled {
		cl.Close()
		return nil, errors.New("ingest options: KafkaOpts disable idempotent writes, which the gateway's duplicate guarantee needs; remove kgo.DisableIdempotentWrite")
	}
	log := opts.Logger.With("component", "ingest")
	g := &Gateway{
		opts:  opts,
		log:   log,
		audit: log.With("audit", true),
		cl:    cl,
		adm:   kadm.NewClient(cl),
		// Zero-copy decoding: prepare keeps nothing that aliases a body
		// past the request (see prepare).
		validator: contract.Validator{Environment: opts.Environment, ZeroCopy: true},
		recent:    newRecentSet(opts.DedupeCapacity),
		sem:       make(chan struct{}, opts.MaxInflight),
		parts:     map[string]partitionCount{},
	}
	g.pol.Store(g.newPolicy(opts.Keys))
	topicNames := []string{opts.Topics.PlatformRecords, opts.Topics.Observations, opts.Topics.Telemetry, opts.Topics.Usage, opts.Topics.Rated, opts.Topics.Ledger}
	g.m = newMetrics(opts.Registry, topicNames, func() float64 { return float64(g.recent.len()) },
		func() float64 { return float64(g.inflightBytes.Load()) })
	g.m.setPolicy("", g.PolicyRev())
	if opts.Keys.Builtin() {
		g.log.Warn("no keys file: accepting only the built-in local_parity API key as "+keys.LocalActorID+" with every event type; never run this way outside local_parity",
			"environment", opts.Environment)
	}
	if !opts.ClientCertAuth && opts.Environment == contract.EnvDev {
		g.log.Warn("dev gateway authenticates by API key; mTLS (-ingest.clientCA) is the dev/prod default")
	}
	g.log.Info("ingest gateway ready", "environment", opts.Environment, "policy_rev", g.PolicyRev(),
		"auth", g.authMode(), "keys", opts.Keys.Len())
	return g, nil
}

// PolicyRev returns the digest of the validation and routing configuration
// in force; it is in every receipt response and record header.
func (g *Gateway) PolicyRev() string { return g.pol.Load().rev }

func (g *Gateway) authMode() string {
	if g.opts.ClientCertAuth {
		return "mtls"
	}
	return "api_key"
}

// Handler serves POST /v1/events, GET /healthz and GET /metrics.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/events", g.serveEvents)
	mux.HandleFunc("GET /healthz", g.serveHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.opts.Registry, promhttp.HandlerOpts{Registry: g.opts.Registry}))
	return mux
}

// EnsureTopics creates missing topics and checks co-partitioning (see
// topics.EnsureReplicated), replicated as r says.
func (g *Gateway) EnsureTopics(ctx context.Context, partitions int32, r topics.Replication) error {
	if err := topics.EnsureReplicated(ctx, g.adm, g.opts.Topics, partitions, r); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	return nil
}

// Drain makes the gateway refuse new requests (503 shutting_down, with
// Retry-After) and fail /healthz, so load balancers move callers to
// another gateway; requests already admitted finish normally.
func (g *Gateway) Drain() { g.draining.Store(true) }

// Close drains, waits (bounded by ctx) for admitted requests to finish,
// flushes buffered records and closes the producer. Call it after the HTTP
// server has stopped taking requests. A request still running when ctx
// ends is not acknowledged: its caller sees an error and retries.
func (g *Gateway) Close(ctx context.Context) error {
	g.Drain()
	done := make(chan struct{})
	go func() { g.handlers.Wait(); close(done) }()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("requests still in flight at close: %w", ctx.Err()))
	}
	if err := g.cl.Flush(ctx); err != nil {
		errs = append(errs, fmt.Errorf("flush producer: %w", err))
	}
	g.cl.Close()
	return errors.Join(errs...)
}

func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
	if g.draining.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := g.cl.Ping(ctx); err != nil {
		http.Error(w, "broker unreachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// partitions returns the partition count of topic, cached for
// PartitionCacheTTL: scan markers are rare, partition changes rarer.
func (g *Gateway) partitions(ctx context.Context, topic string) (int32, error) {
	now := g.opts.now()
	g.partsMu.Lock()
	pc, ok := g.parts[topic]
	g.partsMu.Unlock()
	if ok && now.Sub(pc.at) < g.opts.PartitionCacheTTL {
		return pc.n, nil
	}
	n, err := topics.PartitionCount(ctx, g.adm, topic)
	if err != nil {
		return 0, err
	}
	g.partsMu.Lock()
	g.parts[topic] = partitionCount{n: n, at: now}
	g.partsMu.Unlock()
	return n, nil
}
