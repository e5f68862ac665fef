// Command joiner runs one member of the drift joiner consumer group (see
// package pipeline/joiner). Start more processes with the same -joiner.group
// to scale out; each owns a range of partitions.
//
//	joiner -kafka.brokers 127.0.0.1:19092 -clickhouse.addr 127.0.0.1:19000
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/joiner"
	"github.com/driftline/driftline/pipeline/joiner/classify"
	"github.com/driftline/driftline/pipeline/joiner/dedupe"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream/checkpoint"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

func main() {
	if err := run(); err != nil {
		slog.Error("joiner: " + err.Error())
		os.Exit(1)
	}
}

func run() error {
	fs := flag.CommandLine
	common := service.RegisterFlags(fs)
	logOpts := service.LogFlags(fs)
	addr := fs.String("joiner.addr", service.Env("DRIFTLINE_JOINER_ADDR", service.DefaultJoinerAddr), "HTTP listen address for /metrics and /healthz (env DRIFTLINE_JOINER_ADDR)")
	group := fs.String("joiner.group", "driftline-joiner", "consumer group shared by all joiners; every member owns a range of partitions")
	def := classify.DefaultOptions()
	staleness := fs.Duration("joiner.staleness", def.Staleness, "event time a live-expecting record may go unobserved before it is missing")
	orphanGrace := fs.Duration("joiner.orphanGrace", def.OrphanGrace, "event time a resource may be observed live without an owner before it is an orphan")
	lateness := fs.Duration("joiner.allowedLateness", def.AllowedLateness, "how far the watermark trails the newest event time; larger tolerates more disorder but delays time-based findings")
	retry := fs.Duration("joiner.retryInterval", def.RetryInterval, "spacing of next_attempt_at for findings with a retry posture")
	flushInterval := fs.Duration("joiner.flushInterval", 500*time.Millisecond, "longest time processed events wait before findings are written and offsets committed; larger batches are cheaper for ClickHouse but findings appear later")
	flushEvents := fs.Int("joiner.flushEvents", 200000, "flush after this many events; bounds memory held between commits")
	catchUpInterval := fs.Duration("joiner.catchUpInterval", 3*time.Second, "longest round while the joiner is behind by more than -joiner.flushEvents records (a restart after downtime, a new group): fewer, larger ClickHouse writes while it catches up; not above -joiner.flushInterval turns it off")
	catchUpEvents := fs.Int("joiner.catchUpEvents", 1_000_000, "flush a catch-up round after this many events; bounds memory held between commits while catching up")
	sessionTimeout := fs.Duration("joiner.sessionTimeout", 45*time.Second, "how long the group waits for a crashed joiner before its partitions move to the others; shorter fails over sooner, too short evicts joiners that only pause (the broker bounds it, Kafka's default minimum is 6s)")
	rebalanceTimeout := fs.Duration("joiner.rebalanceTimeout", 60*time.Second, "how long a rebalance waits for every joiner to finish its round and rejoin; bounds the stall when a joiner crashed, too short drops joiners with slow ClickHouse writes")
	checkpoints := fs.String("joiner.checkpointTopic", service.Env("DRIFTLINE_CHECKPOINT_TOPIC", checkpoint.DefaultTopic), "topic of partition state checkpoints, so a restore replays only the records after the newest one; empty disables checkpoints (env DRIFTLINE_CHECKPOINT_TOPIC)")
	checkpointInterval := fs.Duration("joiner.checkpointInterval", 30*time.Second, "how often a partition that applied events is checkpointed; shorter makes restores replay less, longer writes less")
	checkpointEvents := fs.Uint64("joiner.checkpointEvents", 2_000_000, "checkpoint a partition sooner once it applied this many events since its last checkpoint")
	dd := dedupe.DefaultOptions()
	dedupeHorizon := fs.Duration("joiner.dedupeHorizon", dd.Horizon, "event time for which event identities are remembered exactly; events older than watermark - horizon are dropped as late (counted)")
	queueRecords := fs.Int("joiner.queueRecords", 16384, "records of one topic partition that may wait in the merge for an earlier stream before its fetching pauses (bounds memory while one topic runs ahead, and leaves the fetches to the stream waited for)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	idleAfter := fs.Duration("joiner.idleAfter", 5*time.Minute, "wall time a partition may apply nothing before its watermark follows this joiner's latest partition (a marker record in its observations stream); negative disables")
	flag.Parse()
	if _, err := service.SetupLogging(logOpts, os.Stderr); err != nil {
		return err
	}
	if err := common.Validate(); err != nil {
		return err
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				slog.Error("joiner: cpuprofile: " + err.Error())
			}
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A stop signal while starting is a clean stop, not a failure: a
	// supervisor may stop a joiner that has only just been started.
	startErr := func(err error) error {
		if ctx.Err() != nil {
			slog.Info("joiner: stopped while starting", "err", err)
			return nil
		}
		return err
	}

	reg := service.NewRegistry()

	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := readmodel.Open(openCtx, common.ClickHouse)
	if err != nil {
		return startErr(fmt.Errorf("open clickhouse %s: %w", common.ClickHouse.Addr, err))
	}
	defer conn.Close()

	if common.CreateTopics {
		cl, err := kgo.NewClient(kgo.SeedBrokers(common.SeedBrokers()...))
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		err = topics.Ensure(openCtx, kadm.NewClient(cl), common.Topics, int32(common.Partitions), 1)
		cl.Close()
		if err != nil {
			return startErr(err)
		}
	}

	qcl, err := kgo.NewClient(kgo.SeedBrokers(common.SeedBrokers()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil))) // murmur2, as Reroute requires
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer qcl.Close()
	quarantine, err := ingest.NewQuarantiner(qcl, ingest.QuarantinerOptions{ActorID: "SYSTEM::joiner", Topic: common.Topics.Quarantine, Registerer: reg})
	if err != nil {
		return err
	}

	var cps *checkpoint.Store
	if *checkpoints != "" {
		// Checkpoints of partition p go to partition p: the topic needs
		// as many partitions as the joined topics have.
		acl, err := kgo.NewClient(kgo.SeedBrokers(common.SeedBrokers()...))
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		n, err := topics.PartitionCount(openCtx, kadm.NewClient(acl), common.Topics.Observations)
		acl.Close()
		if err != nil {
			return startErr(err)
		}
		cps, err = checkpoint.New(openCtx, checkpoint.Options{Brokers: common.SeedBrokers(), Topic: *checkpoints,
			Partitions: n, Create: common.CreateTopics, Registerer: reg})
		if err != nil {
			return startErr(fmt.Errorf("checkpoints: %w", err))
		}
		defer cps.Close()
	}

	if *catchUpInterval <= 0 {
		*catchUpInterval = -1 // off (the zero Option is the default)
	}
	j, err := joiner.New(openCtx, joiner.Options{
		Brokers:          common.SeedBrokers(),
		Group:            *group,
		Topics:           common.Topics,
		Environment:      common.Environment,
		Classify:         classify.Options{Staleness: *staleness, OrphanGrace: *orphanGrace, AllowedLateness: *lateness, RetryInterval: *retry},
		FlushInterval:    *flushInterval,
		QueueRecords:     *queueRecords,
		FlushEvents:      *flushEvents,
		CatchUpInterval:  *catchUpInterval,
		CatchUpEvents:    *catchUpEvents,
		SessionTimeout:   *sessionTimeout,
		RebalanceTimeout: *rebalanceTimeout,
		Logger:           slog.Default(),
		Registerer:       reg,
		Quarantine:       quarantine,
		Reroute:          qcl,

		Checkpoints:        cps,
		CheckpointInterval: *checkpointInterval,
		CheckpointEvents:   *checkpointEvents,
		IdleAfter:          *idleAfter,
		Dedupe:             dedupe.Options{Horizon: *dedupeHorizon, Bucket: min(dd.Bucket, *dedupeHorizon)},
	}, sink.NewClickHouse(conn))
	if err != nil {
		return startErr(err)
	}

	srv := service.Serve(*addr, reg, func(w http.ResponseWriter, r *http.Request) {
		if err := conn.Ping(r.Context()); err != nil {
			http.Error(w, "clickhouse: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}, func(error) { stop() })
	defer srv.Shutdown()
	slog.Info("joiner running", "group", *group, "brokers", common.Brokers, "clickhouse", common.ClickHouse.Addr, "http", *addr)

	// A stop writes the last batch and a checkpoint of every partition
	// changed since its last one, which the successor restores from; the
	// log says how long that took.
	var signalled atomic.Int64
	context.AfterFunc(ctx, func() { signalled.Store(time.Now().UnixNano()) })
	err = j.Run(ctx)
	if at := signalled.Load(); at != 0 && err == nil {
		slog.Info("joiner stopped", "final_write_and_checkpoints", time.Since(time.Unix(0, at)).Round(time.Millisecond))
	}
	return err
}
