package joiner

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/classify"
	"github.com/driftline/driftline/pipeline/joiner/dedupe"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/checkpoint"
)

// Sink is where the joiner writes findings: the batches of one write
// (the outputs of its partitions) as one.
type Sink interface {
	Write(ctx context.Context, bs ...*sink.Batch) error
}

// Quarantine is where the joiner sends the records that fail validation
// (ingest.Quarantiner is one): Produce sends one asynchronously, and
// Flush waits until every one sent is acknowledged and returns the first
// error since the last Flush. The joiner commits the records' offsets
// only after a Flush that succeeded.
type Quarantine interface {
	Produce(ctx context.Context, rec *kgo.Record, verr *contract.ValidationError)
	Flush(ctx context.Context) error
}

// Checkpoints stores snapshots of partition state (checkpoint.Store is
// one). Save stores the snapshot of group's partition taken at cut, and
// is called only once the offsets of cut are committed; LoadUsable
// returns the newest snapshot at or before notAfter that use accepts.
type Checkpoints interface {
	Save(ctx context.Context, group string, partition int32, cut checkpoint.Cut, blob []byte) error
	LoadUsable(ctx context.Context, group string, partition int32, notAfter checkpoint.Cut,
		use func(checkpoint.Checkpoint) error) (checkpoint.Checkpoint, bool, error)
}

// Options configure a Joiner. A field left at its zero value takes its
// default (DefaultOptions).
type Options struct {
	// StageOptions are the brokers, topics, environment, logger, metrics
	// and client options. The default Group is "driftline-joiner".
	stream.StageOptions
	// RoundOptions size the rounds and the merges. Defaults: flush every
	// 500ms or 200000 events (fewer, larger writes: ClickHouse prefers
	// them), catch up in rounds of 3s or 1,000,000 events, queue 4096
	// records a stream (about one fetch of it; 8 partitions of 3 streams
	// then hold at most ~0.1M records, with the record batches they pin
	// ~100 MB: 16384 held 450 MB of decompressed batches at 10M events).
	stream.RoundOptions
	// Classify holds the event-time windows. Default
	// classify.DefaultOptions().
	Classify classify.Options
	// NodeAgent holds the node-agent evidence thresholds. Default (left
	// zero by DefaultOptions, since it follows Classify)
	// nodeagent.DefaultOptions() with the disconnection and host windows
	// set to Classify.Staleness.
	NodeAgent nodeagent.Options
	// Dedupe sets the dedupe horizon (docs/drift-model.md, dedupe).
	// Default dedupe.DefaultOptions().
	Dedupe dedupe.Options
	// SessionTimeout is how long the group waits for a silent member
	// (a crashed process) before it hands the member's partitions to the
	// others. Shorter fails over sooner but risks evicting a member that
	// is only slow (a long restore or ClickHouse write blocks nothing
	// here: heartbeats run on their own). Default 45s.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for every member to
	// finish its round (write, commit) and rejoin. A member that crashed
	// after the group last settled is dropped only when it passes, so it
	// bounds the stall a crash causes; too short drops members whose
	// ClickHouse write is slow. Default 60s.
	RebalanceTimeout time.Duration
	// SettleTime is how long the group must have been stable before a
	// joiner restores partitions newly assigned to it
	// (stream.Options.SettleTime): joiners that start together then
	// restore each partition once, where it stays, instead of the first
	// one applying everything until the others join and the partitions
	// move (checkpointed, restored again, fetched again). It delays every
	// assignment by about that long, a lone joiner's first one too.
	// Default 1s; negative restores at once.
	SettleTime time.Duration
	// Quarantine receives the records that fail validation (a producer
	// bypassed the gateway), with their reason. Default none: such
	// records are only counted.
	Quarantine Quarantine
	// GC paces the process's collector after each round (the pacer
	// TuneMemory returns). Default none: the collector is left as it is.
	GC *service.GCPacer
	// Reroute, when set, moves records whose key does not hash to the
	// partition they arrived on (a producer bypassed the Kafka-standard
	// partitioner) to the partition it does hash to, so that they join
	// the rest of their identity's state there. It must produce with the
	// default murmur2 partitioner. Default none: such records are applied
	// where they arrived, which joins them correctly only while nothing
	// else of their identity lives on the right partition. Either way they
	// are counted.
	Reroute *kgo.Client
	// Checkpoints, when set, stores snapshots of each owned partition's
	// state after a commit, and a restore starts from the newest one at or
	// before the committed offsets, replaying only the records after it.
	// Default none: a restore replays the streams from their start.
	Checkpoints Checkpoints
	// CheckpointInterval is how often a partition that applied events is
	// checkpointed. Default 30s.
	CheckpointInterval time.Duration
	// CheckpointEvents checkpoints a partition sooner, once it applied
	// this many events since its last checkpoint. Default 2,000,000.
	CheckpointEvents uint64
	// CatchUpHold is how long a partition may hold back its current
	// rows (drift_evidence and node_agent_status) while the joiner is
	// behind (stream.Round.Behind): a node sends a heartbeat in nearly
	// every catch-up round and many findings change in several, and each
	// round's row of them is overwritten by the next round's, so the
	// rows wait, each key's newest kept, with the summaries and progress
	// rows that count them, and are written with the first round that is
	// not behind, the partition's checkpoint, or the stop, at the latest
	// this long after the last ones. Transitions (drift_history) are
	// written every round regardless. Longer writes fewer rows while
	// catching up; the current tables then lag by up to this long.
	// Default 30s; negative writes them every round.
	CatchUpHold time.Duration
	// CatchUpHoldRows bounds the rows the joiner's partitions hold
	// together (CatchUpHold): once a seal finds more, every partition
	// writes its rows. Where the catch-up's rows are not overwritten (a
	// fleet observed once), holding saves nothing, and the rows of a
	// whole hold would grow with the rate. Default 524,288 (about 0.3 GB
	// of packed rows with their strings: 10M events' 250,652 node rows
	// and 205,346 finding rows were 0.27 GB).
	CatchUpHoldRows int
	// Parallelism is how many partitions are applied at once. Default
	// GOMAXPROCS as of DefaultOptions (as of New when left zero).
	Parallelism int
	// MaxClockSkew is how far an event's occurred_at may lie ahead of its
	// record's broker timestamp. A later one is quarantined with reason
	// clock_skew and never applied; an accepted one moves the partition's
	// event time no further than the broker timestamp
	// (docs/event-time.md). Larger admits producers with worse clocks;
	// smaller quarantines events of producers whose clocks run slightly
	// ahead. Default 5m; negative disables the check (not the cap).
	MaxClockSkew time.Duration
	// IgnoreCheckpointsBefore, when set, makes a restore skip the
	// checkpoints written before it and replay the partition from the
	// start of its streams instead, under the rules in force: the way
	// back from a state checkpointed while it was wrong (a watermark a
	// skewed producer moved years ahead before the bounds existed; see
	// docs/event-time.md). Checkpoints written after it are used as
	// usual, so the setting may stay in place. Default none.
	IgnoreCheckpointsBefore time.Time
	// Requests, when set, produces the requests operator actions make
	// (retry, cleanup, quarantine_node, release_node) to
	// Topics.Requests, keyed by identity with the murmur2 partitioner,
	// before the offsets of their commands are committed. Default none:
	// actions are applied and their findings show them pending, but no
	// controller is asked.
	Requests *kgo.Client
	// RequestTimeout is how long, in event time, a request stays pending
	// before its finding goes to operator_review. Default 10m.
	RequestTimeout time.Duration
	// IdleAfter is how long a partition may apply nothing before the
	// joiner advances its watermark to the latest of its other partitions
	// with a marker record in the partition's observations stream (see
	// idle.go). Default 5m; negative disables it.
	IdleAfter time.Duration

	// unbounded applies event time as it was before the bounds of
	// docs/event-time.md: no clock skew check, no cap at the broker
	// timestamp. Only the tests of the way back from a poisoned state set
	// it, to write one.
	unbounded bool
}

// DefaultOptions returns the default of every option but Brokers (and
// those that default to none).
func DefaultOptions() Options {
	return Options{
		StageOptions:       stream.DefaultStageOptions("driftline-joiner"),
		RoundOptions:       stream.DefaultRoundOptions(200_000, 1_000_000, queueRecords),
		Classify:           classify.DefaultOptions(),
		Dedupe:             dedupe.DefaultOptions(),
		SessionTimeout:     45 * time.Second,
		RebalanceTimeout:   60 * time.Second,
		SettleTime:         time.Second,
		CheckpointInterval: 30 * time.Second,
		CheckpointEvents:   2_000_000,
		CatchUpHold:        30 * time.Second,
		CatchUpHoldRows:    1 << 19,
		Parallelism:        runtime.GOMAXPROCS(0),
		IdleAfter:          5 * time.Minute,
		MaxClockSkew:       5 * time.Minute,
		RequestTimeout:     10 * time.Minute,
	}
}

// queueRecords is the joiner's default RoundOptions.QueueRecords: a
// queued record pins the decompressed batch it came in, and 16384 a
// stream held 0.34-0.45 GB of them at 10M events, 4096 0.20-0.25 GB
// (bench/README.md, joiner memory).
const queueRecords = 4096

// defaults fills the options left zero from DefaultOptions and checks
// them.
func (o *Options) defaults() error {
	d := DefaultOptions()
	if err := o.StageOptions.Defaults("joiner", d.StageOptions); err != nil {
		return err
	}
	o.RoundOptions.Defaults(d.RoundOptions)
	stream.Default(&o.Classify, d.Classify)
	if o.NodeAgent == (nodeagent.Options{}) {
		o.NodeAgent = nodeagent.DefaultOptions()
		o.NodeAgent.DisconnectedAfter = o.Classify.Staleness
		o.NodeAgent.HostWindow = o.Classify.Staleness
	}
	if err := o.NodeAgent.Validate(); err != nil {
		return fmt.Errorf("joiner: %w", err)
	}
	stream.Default(&o.Dedupe, d.Dedupe)
	if err := o.Dedupe.Validate(); err != nil {
		return fmt.Errorf("joiner: %w", err)
	}
	stream.DefaultPositive(&o.SessionTimeout, d.SessionTimeout)
	stream.DefaultPositive(&o.RebalanceTimeout, d.RebalanceTimeout)
	stream.Default(&o.SettleTime, d.SettleTime)
	stream.DefaultPositive(&o.Parallelism, d.Parallelism)
	stream.Default(&o.IdleAfter, d.IdleAfter)
	stream.Default(&o.MaxClockSkew, d.MaxClockSkew)
	if o.unbounded {
		o.MaxClockSkew = -1
	}
	stream.DefaultPositive(&o.RequestTimeout, d.RequestTimeout)
	stream.DefaultPositive(&o.CheckpointInterval, d.CheckpointInterval)
	stream.Default(&o.CheckpointEvents, d.CheckpointEvents)
	stream.Default(&o.CatchUpHold, d.CatchUpHold)
	stream.DefaultPositive(&o.CatchUpHoldRows, d.CatchUpHoldRows)
	return nil
}
