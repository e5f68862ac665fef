package joiner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/classify"
	"github.com/driftline/driftline/pipeline/joiner/dedupe"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
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
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Group is the consumer group all joiners share. Default
	// "driftline-joiner".
	Group string
	// Topics names the topics. Default contract.DefaultTopics().
	Topics contract.Topics
	// Environment is the pipeline's environment; events for another are
	// invalid. Default local_parity.
	Environment string
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
	// FlushInterval bounds how long processed events wait before their
	// findings are written and their offsets committed. Default 500ms.
	FlushInterval time.Duration
	// FlushEvents flushes once this many events were processed. Default
	// 200000 (fewer, larger writes: ClickHouse prefers them).
	FlushEvents int
	// CatchUpInterval bounds a round instead of FlushInterval while the
	// joiner is behind by more than FlushEvents records (see
	// logmerge.Rounds): fewer, larger writes while it catches up.
	// Default 3s; a negative one, or one not above FlushInterval, turns
	// catching up off.
	CatchUpInterval time.Duration
	// CatchUpEvents bounds a catch-up round's events. Default 1,000,000.
	CatchUpEvents int
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
	// Logger receives operational logs. Default slog.Default() as of New.
	Logger *slog.Logger
	// Registerer receives the joiner's metrics. Default none.
	Registerer prometheus.Registerer
	// Quarantine receives the records that fail validation (a producer
	// bypassed the gateway), with their reason. Default none: such
	// records are only counted.
	Quarantine Quarantine
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
	// Parallelism is how many partitions are applied at once. Default
	// GOMAXPROCS as of DefaultOptions (as of New when left zero).
	Parallelism int
	// IdleAfter is how long a partition may apply nothing before the
	// joiner advances its watermark to the latest of its other partitions
	// with a marker record in the partition's observations stream (see
	// idle.go). Default 5m; negative disables it.
	IdleAfter time.Duration
	// QueueRecords bounds the records a stream of one partition may hold
	// in its merge, waiting for an earlier stream (platform records being
	// read while the observations after them are already fetched): at
	// that many the stream's fetching pauses until the merge has drained
	// it to a quarter (logmerge.Throttle). Default 16384 (a few fetches;
	// 8 partitions of 3 streams then hold at most ~0.4M records, ~200 MB).
	QueueRecords int
	// ClientOpts are extra franz-go options of every client (tests, TLS,
	// SASL). Default none.
	ClientOpts []kgo.Opt
}

// DefaultOptions returns the default of every option but Brokers (and
// those that default to none).
func DefaultOptions() Options {
	return Options{
		Group:              "driftline-joiner",
		Topics:             contract.DefaultTopics(),
		Environment:        contract.EnvLocalParity,
		Classify:           classify.DefaultOptions(),
		Dedupe:             dedupe.DefaultOptions(),
		FlushInterval:      500 * time.Millisecond,
		FlushEvents:        200_000,
		CatchUpInterval:    3 * time.Second,
		CatchUpEvents:      1_000_000,
		SessionTimeout:     45 * time.Second,
		RebalanceTimeout:   60 * time.Second,
		CheckpointInterval: 30 * time.Second,
		CheckpointEvents:   2_000_000,
		Parallelism:        runtime.GOMAXPROCS(0),
		IdleAfter:          5 * time.Minute,
		QueueRecords:       16384,
	}
}

// defaults fills the options left zero from DefaultOptions and checks
// them.
func (o *Options) defaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("joiner: no brokers")
	}
	d := DefaultOptions()
	if o.Group == "" {
		o.Group = d.Group
	}
	if o.Topics == (contract.Topics{}) {
		o.Topics = d.Topics
	}
	if o.Environment == "" {
		o.Environment = d.Environment
	}
	if o.Classify == (classify.Options{}) {
		o.Classify = d.Classify
	}
	if o.NodeAgent == (nodeagent.Options{}) {
		o.NodeAgent = nodeagent.DefaultOptions()
		o.NodeAgent.DisconnectedAfter = o.Classify.Staleness
		o.NodeAgent.HostWindow = o.Classify.Staleness
	}
	if err := o.NodeAgent.Validate(); err != nil {
		return fmt.Errorf("joiner: %w", err)
	}
	if o.Dedupe == (dedupe.Options{}) {
		o.Dedupe = d.Dedupe
	}
	if err := o.Dedupe.Validate(); err != nil {
		return fmt.Errorf("joiner: %w", err)
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = d.FlushInterval
	}
	if o.FlushEvents <= 0 {
		o.FlushEvents = d.FlushEvents
	}
	if o.CatchUpInterval == 0 {
		o.CatchUpInterval = d.CatchUpInterval
	}
	if o.CatchUpEvents <= 0 {
		o.CatchUpEvents = d.CatchUpEvents
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = d.SessionTimeout
	}
	if o.RebalanceTimeout <= 0 {
		o.RebalanceTimeout = d.RebalanceTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Parallelism <= 0 {
		o.Parallelism = d.Parallelism
	}
	if o.IdleAfter == 0 {
		o.IdleAfter = d.IdleAfter
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = d.CheckpointInterval
	}
	if o.CheckpointEvents == 0 {
		o.CheckpointEvents = d.CheckpointEvents
	}
	if o.QueueRecords <= 0 {
		o.QueueRecords = d.QueueRecords
	}
	return nil
}
