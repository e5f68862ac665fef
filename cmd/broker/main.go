// Command broker runs a persistent single-node Kafka-protocol broker for the
// local stack and tests: franz-go's kfake with its data on disk, so records,
// topics and committed offsets survive a restart. It listens on loopback
// only and creates the pipeline's topics at start.
//
// It is a development broker, not a production one: one node, no
// replication. Production points DRIFTLINE_BROKERS at Kafka or Redpanda.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

func main() {
	fs := flag.NewFlagSet("broker", flag.ExitOnError)
	common := service.RegisterFlags(fs)
	addr := fs.String("broker.addr", firstBroker(service.Env("DRIFTLINE_BROKERS", service.DefaultBrokers)),
		"loopback host:port to listen on (default: the first entry of DRIFTLINE_BROKERS); port 0 picks a free port, printed at start")
	dataDir := fs.String("broker.dataDir", service.Env("DRIFTLINE_BROKER_DATA_DIR", ".driftline/broker"),
		"directory holding topics, records and committed offsets; reused on restart, so delete it to start empty")
	syncWrites := fs.Bool("broker.sync", false,
		"fsync every produced batch: no acknowledged record is lost even on a machine crash, at several times lower produce throughput; "+
			"without it data is flushed on graceful stop and segment roll, and a crash of the machine (not of the process) can lose the last batches")
	autoCreate := fs.Bool("broker.autoCreateTopics", false,
		"create unknown topics on first use, like Kafka's auto.create.topics.enable; off so that a misspelt topic name fails loudly")
	logLevel := fs.String("broker.logLevel", "warn", "broker log level: none, error, warn, info or debug; info logs every request")
	_ = fs.Parse(os.Args[1:])

	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("broker: ")
	if err := run(common, *addr, *dataDir, *syncWrites, *autoCreate, *logLevel); err != nil {
		log.Fatal(err)
	}
}

func run(common *service.Common, addr, dataDir string, syncWrites, autoCreate bool, logLevel string) error {
	if common.Partitions < 1 {
		return fmt.Errorf("-kafka.partitions %d: must be at least 1", common.Partitions)
	}
	host, port, err := loopback(addr)
	if err != nil {
		return err
	}
	level, err := parseLevel(logLevel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}

	opts := []kfake.Opt{
		kfake.Ports(port),
		// kfake always asks for 127.0.0.1; listen on the host we were given
		// (it is loopback, checked above) so ::1 and localhost work too.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
		kfake.ClusterID("driftline-local"),
		kfake.DataDir(dataDir),
		kfake.DefaultNumPartitions(common.Partitions),
		kfake.WithLogger(kfake.BasicLogger(os.Stderr, level)),
	}
	if syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	if autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker (data dir %s): %w; Possible solutions: stop whatever listens on %s, or pick another -broker.addr", dataDir, err, addr)
	}
	listen := cluster.ListenAddrs()[0]

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if common.CreateTopics {
		if err := ensureTopics(ctx, listen, common); err != nil {
			cluster.Close()
			return err
		}
	}
	log.Printf("listening on %s (data dir %s, sync writes %v, %d partitions per topic)", listen, dataDir, syncWrites, common.Partitions)

	<-ctx.Done()
	log.Printf("stopping: flushing data to %s", dataDir)
	start := time.Now()
	cluster.Close()
	log.Printf("stopped in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// ensureTopics creates the contract topics through the broker's own Kafka
// API, exactly as the services would, so the checks on co-partitioning run
// against what a client sees.
func ensureTopics(ctx context.Context, addr string, common *service.Common) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return fmt.Errorf("topic admin client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := topics.Ensure(ctx, kadm.NewClient(cl), common.Topics, int32(common.Partitions), 1); err != nil {
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

func parseLevel(s string) (kfake.LogLevel, error) {
	switch strings.ToLower(s) {
	case "none":
		return kfake.LogLevelNone, nil
	case "error":
		return kfake.LogLevelError, nil
	case "warn":
		return kfake.LogLevelWarn, nil
	case "info":
		return kfake.LogLevelInfo, nil
	case "debug":
		return kfake.LogLevelDebug, nil
	}
	return 0, fmt.Errorf("-broker.logLevel %q: must be none, error, warn, info or debug", s)
}
