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
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/joiner"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/readmodel/retention"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/service/stage"
	"github.com/driftline/driftline/pipeline/stream/checkpoint"
)

func main() { service.Main("joiner", run) }

func run() error {
	st := stage.New("joiner", "DRIFTLINE_JOINER_ADDR", service.DefaultJoinerAddr)
	fs, o := flag.CommandLine, joiner.DefaultOptions()
	st.StageFlags("joiner", "joiners", &o.StageOptions)
	st.RoundFlags("joiner", "joiner", &o.RoundOptions)
	st.CPUProfileFlag()
	fs.DurationVar(&o.Classify.Staleness, "joiner.staleness", o.Classify.Staleness, "event time a live-expecting record may go unobserved before it is missing")
	fs.DurationVar(&o.Classify.OrphanGrace, "joiner.orphanGrace", o.Classify.OrphanGrace, "event time a resource may be observed live without an owner before it is an orphan")
	fs.DurationVar(&o.Classify.AllowedLateness, "joiner.allowedLateness", o.Classify.AllowedLateness, "how far the watermark trails the newest event time; larger tolerates more disorder but delays time-based findings")
	fs.DurationVar(&o.Classify.RetryInterval, "joiner.retryInterval", o.Classify.RetryInterval, "spacing of next_attempt_at for findings with a retry posture")
	fs.DurationVar(&o.SessionTimeout, "joiner.sessionTimeout", o.SessionTimeout, "how long the group waits for a crashed joiner before its partitions move to the others; shorter fails over sooner, too short evicts joiners that only pause (the broker bounds it, Kafka's default minimum is 6s)")
	fs.DurationVar(&o.RebalanceTimeout, "joiner.rebalanceTimeout", o.RebalanceTimeout, "how long a rebalance waits for every joiner to finish its round and rejoin; bounds the stall when a joiner crashed, too short drops joiners with slow ClickHouse writes")
	fs.DurationVar(&o.SettleTime, "joiner.settleTime", o.SettleTime, "how long the group must have been stable before a joiner restores partitions newly assigned to it, so that joiners starting together (a deploy) restore each partition once instead of moving it as each one joins; delays every assignment by about that long; negative restores at once")
	cpTopic := fs.String("joiner.checkpointTopic", service.Env("DRIFTLINE_CHECKPOINT_TOPIC", checkpoint.DefaultTopic), "topic of partition state checkpoints, so a restore replays only the records after the newest one; empty disables checkpoints (env DRIFTLINE_CHECKPOINT_TOPIC)")
	fs.DurationVar(&o.CheckpointInterval, "joiner.checkpointInterval", o.CheckpointInterval, "how often a partition that applied events is checkpointed; shorter makes restores replay less, longer writes less")
	fs.Uint64Var(&o.CheckpointEvents, "joiner.checkpointEvents", o.CheckpointEvents, "checkpoint a partition sooner once it applied this many events since its last checkpoint")
	fs.DurationVar(&o.Dedupe.Horizon, "joiner.dedupeHorizon", o.Dedupe.Horizon, "event time for which event identities are remembered exactly; events older than watermark - horizon are dropped as late (counted)")
	fs.DurationVar(&o.CatchUpHold, "joiner.catchUpHold", o.CatchUpHold, "while the joiner is behind, how long a partition may hold back its current finding and node-agent rows (each key's newest kept), with the summaries and progress rows that count them, before writing them; they are written at once when it has caught up. Transitions are written every round. Longer writes fewer rows while catching up, and drift_evidence and node_agent_status lag by up to this long then; negative writes them every round")
	fs.IntVar(&o.CatchUpHoldRows, "joiner.catchUpHoldRows", o.CatchUpHoldRows, "the most rows the joiner's partitions hold back together while it is behind (-joiner.catchUpHold); past it they are written. Bounds the memory of a catch-up whose rows are not overwritten")
	fs.DurationVar(&o.MaxClockSkew, "joiner.maxClockSkew", o.MaxClockSkew, "how far an event's occurred_at may lie ahead of its record's broker timestamp; later events are quarantined (clock_skew), never applied. Accepted events move event time no further than their broker timestamp. Larger admits worse producer clocks; negative disables the check")
	fs.Func("joiner.ignoreCheckpointsBefore", "RFC 3339 time: restores skip checkpoints written before it and replay the partition from the start of its streams under the rules in force (the way back from a state checkpointed while wrong, docs/event-time.md); later checkpoints are used as usual", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return err
		}
		o.IgnoreCheckpointsBefore = t
		return nil
	})
	fs.DurationVar(&o.IdleAfter, "joiner.idleAfter", o.IdleAfter, "wall time a partition may apply nothing before its watermark follows this joiner's latest partition (a marker record in its observations stream); negative disables")
	var keep retention.Policy
	retainEvery := fs.Duration("retention.interval", retention.DefaultInterval, "how often this joiner drops the read model's partitions past retention (docs/deploy.md); 0 turns retention off here, e.g. when another process runs it")
	fs.DurationVar(&keep.History, "retention.history", 0, "how long drift_history keeps a month; 0 takes the environment's default (local_parity 30 days, dev 90, prod 400), negative keeps it forever")
	fs.DurationVar(&keep.Rated, "retention.rated", 0, "how long rated_usage keeps a month; 0 takes the environment's default (local_parity 90 days, dev 180, prod 2557: seven years), negative keeps it forever")
	fs.DurationVar(&keep.Windows, "retention.windows", 0, "how long billing_window keeps a month; 0 takes the environment's default (as -retention.rated), negative keeps it forever")
	fs.DurationVar(&keep.Lifecycle, "retention.lifecycle", 0, "how long node_lifecycle_history keeps a month (the month of a node's newest transition is kept); 0 takes the environment's default (as -retention.history), negative keeps it forever")
	fs.DurationVar(&keep.SyncDebt, "retention.syncdebt", 0, "how long sync_debt_minute keeps a month; 0 takes the environment's default (local_parity 7 days, dev 30, prod 90), negative keeps it forever")
	fs.DurationVar(&keep.Progress, "retention.progress", 0, "how long a consumer_progress key may stop reporting before it is deleted; 0 takes the environment's default (local_parity 7 days, dev 30, prod 90), negative keeps it forever")
	mem := joiner.DefaultMemoryOptions()
	fs.IntVar(&mem.GCPercent, "joiner.gcPercent", mem.GCPercent, "the Go collector's target (as GOGC): a collection starts once the heap grew by this percentage of what was live; lower keeps RSS nearer the partitions' state for more CPU in the collector (100 ran RSS at about twice the live heap); negative leaves GOGC or Go's default; GOGC, when set, wins")
	bytesVar(fs, &mem.GCHeadroom, "joiner.gcHeadroom", "bytes (or with a KiB/MiB/GiB suffix) the heap may grow past the live heap once that is large: after each round the collector's target is lowered from -joiner.gcPercent toward it, to no less than 25%, so that a joiner at fleet scale holds RSS nearer its state (a small one keeps -joiner.gcPercent); 0 keeps -joiner.gcPercent throughout (default 256MiB)")
	bytesVar(fs, &mem.Limit, "joiner.memoryLimit", "soft limit on the memory the Go runtime holds (as GOMEMLIMIT; bytes, or with a KiB/MiB/GiB suffix): near it the collector runs more often and returns freed memory sooner. It bounds the collector's headroom, not the state. 0 takes 90% of the cgroup's memory limit when there is one, else none; negative sets none; GOMEMLIMIT, when set, wins (default 0)")
	fs.DurationVar(&o.RequestTimeout, "joiner.requestTimeout", o.RequestTimeout, "event time a request of an operator action (retry, cleanup, quarantine_node, release_node) stays pending before its finding goes to operator_review")
	ctx, err := st.Start()
	if err != nil {
		return err
	}
	defer st.Close()
	memLimit, gc := joiner.TuneMemory(mem)
	o.GC = gc
	common := st.Common
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := readmodel.Open(openCtx, common.ClickHouse)
	if err != nil {
		return st.Starting(ctx, fmt.Errorf("open clickhouse %s: %w", common.ClickHouse.Addr, err))
	}
	defer conn.Close()
	if err := common.EnsureTopics(openCtx); err != nil {
		return st.Starting(ctx, err)
	}

	qcl, err := common.KafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil))) // murmur2, as Reroute requires
	if err != nil {
		return err
	}
	defer qcl.Close()
	if o.Quarantine, err = ingest.NewQuarantiner(qcl, ingest.QuarantinerOptions{ActorID: "SYSTEM::joiner", Topic: common.Topics.Quarantine, Registerer: st.Registry}); err != nil {
		return err
	}
	if *cpTopic != "" {
		// Checkpoints of partition p go to partition p: the topic needs
		// as many partitions as the joined topics have.
		n, err := common.PartitionCount(openCtx, common.Topics.Observations)
		if err != nil {
			return st.Starting(ctx, err)
		}
		repl := common.Kafka.Replication()
		cps, err := checkpoint.New(openCtx, checkpoint.Options{Brokers: common.SeedBrokers(), Topic: *cpTopic,
			Partitions: n, Create: common.CreateTopics, Replication: repl.Factor, TopicConfig: repl.ConfigStrings(),
			Registerer: st.Registry, ClientOpts: common.KafkaOpts()})
		if err != nil {
			return st.Starting(ctx, fmt.Errorf("checkpoints: %w", err))
		}
		defer cps.Close()
		o.Checkpoints = cps
	}

	o.Dedupe.Bucket = min(o.Dedupe.Bucket, o.Dedupe.Horizon)
	o.Reroute = qcl
	o.Requests = qcl
	j, err := joiner.New(openCtx, o, sink.NewClickHouse(conn))
	if err != nil {
		return st.Starting(ctx, err)
	}

	if *retainEvery > 0 {
		policy := retention.DefaultPolicy(common.Environment).Override(keep)
		policy.Cluster = common.ClickHouse.Cluster
		go retention.Run(ctx, conn, policy, *retainEvery, slog.With("component", "retention"))
	}

	srv := st.Serve(func(w http.ResponseWriter, r *http.Request) {
		if err := conn.Ping(r.Context()); err != nil {
			http.Error(w, "clickhouse: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	defer srv.Shutdown()
	slog.Info("joiner running", "group", o.Group, "brokers", common.Brokers, "clickhouse", common.ClickHouse.Addr, "http", st.Addr, "memory_limit", memLimit, "gc_headroom", gcHeadroom(gc))

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

// gcHeadroom returns the headroom gc paces the collector by (0: none).
func gcHeadroom(gc *service.GCPacer) uint64 {
	if gc == nil {
		return 0
	}
	return gc.Headroom
}

// bytesVar defines a flag of bytes, or with a KiB/MiB/GiB suffix
// (joiner.ParseBytes), stored in *p.
func bytesVar(fs *flag.FlagSet, p *int64, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		n, err := joiner.ParseBytes(s)
		*p = n
		return err
	})
}
