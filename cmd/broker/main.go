// Command broker runs a persistent single-node Kafka-protocol broker for the
// local stack and tests (package internal/broker): records, topics and
// committed offsets survive a restart. It listens on loopback only and
// creates the pipeline's topics at start.
//
// It is a development broker, not a production one: one node, no
// replication. Production points DRIFTLINE_BROKERS at Kafka or Redpanda.
package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/driftline/driftline/internal/broker"
	"github.com/driftline/driftline/pipeline/service"
)

func main() {
	cl, opts := service.NewCommandLine("broker"), broker.DefaultOptions()
	cl.StringVar(&opts.Addr, "broker.addr", opts.Addr,
		"loopback host:port to listen on (default: the first entry of DRIFTLINE_BROKERS); port 0 picks a free port, printed at start")
	cl.StringVar(&opts.DataDir, "broker.dataDir", opts.DataDir,
		"directory holding topics, records and committed offsets (env DRIFTLINE_BROKER_DATA_DIR); reused on restart, so delete it to start empty")
	cl.BoolVar(&opts.Sync, "broker.sync", opts.Sync,
		"fsync every produced batch: no acknowledged record is lost even on a machine crash, at several times lower produce throughput; "+
			"without it data is flushed on graceful stop and segment roll, and a crash of the machine (not of the process) can lose the last batches")
	cl.BoolVar(&opts.AutoCreateTopics, "broker.autoCreateTopics", opts.AutoCreateTopics,
		"create unknown topics on first use, like Kafka's auto.create.topics.enable; off so that a misspelt topic name fails loudly")
	cl.StringVar(&opts.LogLevel, "broker.logLevel", opts.LogLevel,
		"the broker's own verbosity: none, error, warn, info or debug; info logs every request (lines below -log.level are dropped too)")
	log := cl.Parse()
	opts.Partitions, opts.CreateTopics, opts.Topics, opts.Logger = cl.Common.Partitions, cl.Common.CreateTopics, cl.Common.Topics, log
	if err := run(opts, log); err != nil {
		log.Error("broker: " + err.Error())
		os.Exit(1)
	}
}

func run(opts broker.Options, log *slog.Logger) error {
	ctx, stop := service.SignalContext()
	defer stop()
	b, err := broker.Start(ctx, opts)
	if err != nil {
		return err
	}
	log.Info("broker listening", "addr", b.Addr(), "data_dir", opts.DataDir, "sync_writes", opts.Sync, "partitions", opts.Partitions)

	<-ctx.Done()
	log.Info("broker stopping: flushing data", "data_dir", opts.DataDir)
	start := time.Now()
	b.Close()
	log.Info("broker stopped", "took", time.Since(start).Round(time.Millisecond))
	return nil
}
