package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/event"
	"github.com/driftline/driftline/pipeline/topics"
)

// Gateway is the ingest gateway. Create it with New, serve Handler, and
// Close it after the HTTP server has shut down.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	cl        *kgo.Client
	adm       *kadm.Client
	validator event.Validator
	policyRev string
	recent    *recentSet
	sem       chan struct{} // one token per in-flight request
	m         *metrics

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
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	g := &Gateway{
		opts:      opts,
		log:       opts.Logger.With("component", "ingest"),
		cl:        cl,
		adm:       kadm.NewClient(cl),
		validator: event.Validator{Environment: opts.Environment},
		policyRev: policyRev(opts.Environment, opts.Topics, opts.Keys),
		recent:    newRecentSet(opts.DedupeCapacity),
		sem:       make(chan struct{}, opts.MaxInflight),
		parts:     map[string]partitionCount{},
	}
	topicNames := []string{opts.Topics.PlatformRecords, opts.Topics.Observations, opts.Topics.Telemetry, opts.Topics.Usage, opts.Topics.Rated, opts.Topics.Ledger}
	g.m = newMetrics(opts.Registry, topicNames, func() float64 { return float64(g.recent.len()) })
	if opts.Keys.Builtin() {
		g.log.Warn("no keys file: accepting only the built-in local_parity API key as "+LocalActorID+" with every event type; never run this way outside local_parity",
			"environment", opts.Environment)
	}
	g.log.Info("ingest gateway ready", "environment", opts.Environment, "policy_rev", g.policyRev, "keys", opts.Keys.Len())
	return g, nil
}

// PolicyRev returns the digest of the validation and routing configuration
// in force; it is in every receipt response and record header.
func (g *Gateway) PolicyRev() string { return g.policyRev }

// Handler serves POST /v1/events, GET /healthz and GET /metrics.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/events", g.serveEvents)
	mux.HandleFunc("GET /healthz", g.serveHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.opts.Registry, promhttp.HandlerOpts{Registry: g.opts.Registry}))
	return mux
}

// EnsureTopics creates missing topics and checks co-partitioning (see
// topics.Ensure). Replication -1 takes the broker's default.
func (g *Gateway) EnsureTopics(ctx context.Context, partitions int32, replication int16) error {
	if err := topics.Ensure(ctx, g.adm, g.opts.Topics, partitions, replication); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	return nil
}

// Close flushes buffered records (bounded by ctx) and closes the producer.
// Call it after the HTTP server has stopped sending requests.
func (g *Gateway) Close(ctx context.Context) error {
	err := g.cl.Flush(ctx)
	g.cl.Close()
	if err != nil {
		return fmt.Errorf("flush producer: %w", err)
	}
	return nil
}

func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
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
