// Package broker runs the local stack's Kafka-protocol broker: franz-go's
// kfake with its data on disk, so records, topics and committed offsets
// survive a restart. It listens on loopback only and creates the
// pipeline's topics at start (cmd/broker is its command line).
//
// It is a development broker, not a production one: one node, no
// replication, no authentication. Production points DRIFTLINE_BROKERS at
// Kafka or Redpanda.
package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

// Options configure a broker.
type Options struct {
	// Addr is the loopback host:port to listen on; port 0 picks a free
	// port (Broker.Addr says which). Default: the first entry of
	// DRIFTLINE_BROKERS.
	Addr string
	// DataDir holds topics, records and committed offsets; it is reused
	// on restart. Default .driftline/broker (DRIFTLINE_BROKER_DATA_DIR).
	DataDir string
	// Sync fsyncs every produced batch: no acknowledged record is lost
	// even on a machine crash, at several times lower produce
	// throughput. Without it data is flushed on Close and segment roll.
	Sync bool
	// AutoCreateTopics creates unknown topics on first use, like Kafka's
	// auto.create.topics.enable. Default off, so that a misspelt topic
	// name fails loudly.
	AutoCreateTopics bool
	// Partitions of every topic created. Default 6 (DRIFTLINE_PARTITIONS).
	Partitions int
	// CreateTopics creates the contract topics (Topics) at start.
	// Default true.
	CreateTopics bool
	// Topics are the topic names created at start. Default
	// contract.DefaultTopics().
	Topics contract.Topics
	// LogLevel is the broker's own verbosity: none, error, warn, info
	// (every request) or debug. Default warn. Its lines go to Logger.
	LogLevel string
	// Logger receives the broker's log lines. Default slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the options of the local stack's broker, taking
// its settings from the environment when set.
func DefaultOptions() Options {
	return Options{
		Addr:         firstBroker(service.Env("DRIFTLINE_BROKERS", service.DefaultBrokers)),
		DataDir:      service.Env("DRIFTLINE_BROKER_DATA_DIR", ".driftline/broker"),
		Partitions:   service.EnvInt("DRIFTLINE_PARTITIONS", service.DefaultPartitions),
		CreateTopics: true,
		Topics:       contract.DefaultTopics(),
		LogLevel:     "warn",
	}
}

// Broker is a running broker.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
}

// Start validates opts, starts the broker and, with CreateTopics, creates
// the topics through its own Kafka API, exactly as the services would, so
// the checks on co-partitioning run against what a client sees.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	if opts.Partitions < 1 {
		return nil, fmt.Errorf("-kafka.partitions %d: must be at least 1", opts.Partitions)
	}
	host, port, err := loopback(opts.Addr)
	if err != nil {
		return nil, err
	}
	level, err := parseLevel(opts.LogLevel)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Topics == (contract.Topics{}) {
		opts.Topics = contract.DefaultTopics()
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	kopts := []kfake.Opt{
		kfake.Ports(port),
		// kfake always asks for 127.0.0.1; listen on the host we were given
		// (it is loopback, checked above) so ::1 and localhost work too.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
		kfake.ClusterID("driftline-local"),
		kfake.DataDir(opts.DataDir),
		kfake.DefaultNumPartitions(opts.Partitions),
		kfake.WithLogger(&logger{level: level, log: opts.Logger}),
	}
	if opts.Sync {
		kopts = append(kopts, kfake.SyncWrites())
	}
	if opts.AutoCreateTopics {
		kopts = append(kopts, kfake.AllowAutoTopicCreation())
	}
	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("start broker (data dir %s): %w; Possible solutions: stop whatever listens on %s, or pick another -broker.addr", opts.DataDir, err, opts.Addr)
	}
	b := &Broker{cluster: cluster, addr: cluster.ListenAddrs()[0]}
	if opts.CreateTopics {
		if err := b.ensureTopics(ctx, opts); err != nil {
			cluster.Close()
			return nil, err
		}
	}
	return b, nil
}

// Addr returns the address the broker listens on.
func (b *Broker) Addr() string { return b.addr }

// Close stops the broker, flushing its data to disk first.
func (b *Broker) Close() { b.cluster.Close() }

func (b *Broker) ensureTopics(ctx context.Context, opts Options) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		return fmt.Errorf("topic admin client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := topics.Ensure(ctx, kadm.NewClient(cl), opts.Topics, int32(opts.Partitions), 1); err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	return nil
}

// loopback splits addr and refuses anything but a loopback host: the broker
// has no authentication, so it must not be reachable from the network.
func loopback(addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("-broker.addr %q: %w", addr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("-broker.addr %q: bad port", addr)
	}
	if host == "" {
		return "", 0, fmt.Errorf("-broker.addr %q: the host is empty, which would listen on every interface; Possible solutions: use 127.0.0.1:%d", addr, port)
	}
	if host == "localhost" {
		return "127.0.0.1", port, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", 0, fmt.Errorf("-broker.addr %q: the broker has no authentication and listens on loopback only; Possible solutions: use 127.0.0.1:%d, or run Kafka/Redpanda (deploy/redpanda) for a networked broker", addr, port)
	}
	return host, port, nil
}

func firstBroker(brokers string) string {
	first, _, _ := strings.Cut(brokers, ",")
	return strings.TrimSpace(first)
}
