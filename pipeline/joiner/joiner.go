// Package joiner runs the drift joiner: one member of a Kafka consumer
// group over the co-partitioned platform.records, provider.observations and
// nodeagent.telemetry topics. For each partition it owns, it dedupes
// events, joins observations to the platform records that own them,
// classifies drift in event time (package classify), and writes finding
// transitions to ClickHouse (package sink).
//
// Offsets are committed only after ClickHouse has the batch, so a crash
// replays at most the uncommitted tail; the writes are idempotent, so a
// replay changes nothing. Scale out by starting more joiners in the same
// group: partitions are range-assigned across the three topics so that a
// worker always owns all streams of a partition number.
//
// Findings depend on the order in which a partition's events are applied
// (the event-time watermark moves with every event), so the three streams
// of a partition are merged into one order that depends only on the logs
// (see merge): an uninterrupted joiner, one that crashed and restarted,
// and a replay of the same topics into empty tables write the same rows.
//
// On assignment a worker restores the partition's state by replaying the
// three streams through the same merge up to the group's committed
// offsets, without writing anything (those transitions are already in
// ClickHouse). Restore time therefore grows with the retained history of
// observations.
package joiner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// Joiner is one member of the joiner consumer group: the processor of a
// stream.Member (see member.go).
type Joiner struct {
	opts Options
	sink Sink
	m    *metrics
	// validator is the decoders' configuration (each partition decodes
	// with its own Decoder, zero-copy: nothing the partition keeps aliases
	// a record).
	validator contract.Validator
	member    *stream.Member
	markers   *kgo.Client // writes watermark markers to idle partitions
	// eventCounters are m.events of each stream (see countEvents).
	eventCounters [numStreams]prometheus.Counter

	// partitions is the partition count of the joined topics, for the
	// mis-partitioning check.
	partitions int32

	// The member's lock protects the fields below: its poll loop holds it
	// while it applies and seals batches, its group callbacks while they
	// restore or drop partitions.

	parts map[int32]*partition
	// inflight is the sealed batch being written and committed in the
	// background (see flush.go), nil if none; spare is a settled one kept
	// for its buffers.
	inflight, spare *batch
	// freeParts are emptied partition outputs of settled batches, kept
	// for their buffers (see gather).
	freeParts []*sink.Batch
	// sealing is seal's list of each partition with its part of the
	// batch.
	sealing []sealedPart
	// failed is the error of a batch settled by a group callback, returned
	// by the next flush.
	failed error
	// busy is applyAll's scratch list of partitions with records.
	busy []readyPart
	// flow pauses streams that ran ahead in their merges (throttle).
	flow logmerge.Throttle
	// pool holds the memory of fetched records: applyAll recycles each
	// record it applied and did not keep (to quarantine or reroute).
	pool logmerge.FetchPool
	// kept holds the state of revoked partitions: if one comes back and
	// nobody committed past it meanwhile, it is used as it is.
	kept map[int32]*partition
	// saves tracks the checkpoint writes in flight.
	saves sync.WaitGroup
}

type rejected struct {
	rec  *kgo.Record
	verr *contract.ValidationError
}

// New connects to the brokers and returns a Joiner writing to s.
func New(ctx context.Context, opts Options, s Sink) (*Joiner, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	j := &Joiner{
		opts:      opts,
		sink:      s,
		m:         newMetrics(opts.Registerer),
		validator: contract.Validator{Environment: opts.Environment, ZeroCopy: true},
		parts:     make(map[int32]*partition),
		kept:      make(map[int32]*partition),
		flow:      logmerge.NewThrottle(opts.QueueRecords),
	}
	j.initCounters()
	var err error
	if j.markers, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts.ClientOpts...)...); err != nil {
		return nil, fmt.Errorf("joiner: marker producer: %w", err)
	}
	mopts := opts.Member("joiner", opts.Topics.Joined())
	mopts.SessionTimeout, mopts.RebalanceTimeout, mopts.SettleTime = opts.SessionTimeout, opts.RebalanceTimeout, opts.SettleTime
	mopts.KeepControlRecords, mopts.Rounds = true, opts.Rounds()
	mopts.ConsumerOpts = []kgo.Opt{kgo.WithPools(&j.pool)}
	j.member, err = stream.NewMember(ctx, mopts)
	if err != nil {
		j.markers.Close()
		return nil, err
	}
	j.partitions = j.member.Partitions()
	if err := j.member.Join(ctx, (*processor)(j)); err != nil {
		j.markers.Close()
		return nil, err
	}
	return j, nil
}

// Run consumes until ctx is done or the client is closed. Each round
// polls for up to FlushInterval or FlushEvents and applies the records;
// then the round is sealed into a batch whose findings are written and
// offsets committed in the background while the next round is applied
// (one batch at a time, in order: see flush.go), and a rebalance may
// proceed. When ctx ends, the last batch is written before Run returns.
// It returns why the joiner stopped: nil when ctx ended.
func (j *Joiner) Run(ctx context.Context) error { return j.member.Run(ctx) }

// applyAll applies what the merges of the owned partitions can release,
// the partitions in parallel (their states are independent), and returns
// the number of records applied. The member's lock is held.
func (j *Joiner) applyAll(now time.Time) int {
	drain := func(part *partition) int {
		// Positions are exact (see Run): the merge waits for a stream
		// with more records as long as it takes, never guessing.
		kept := len(part.rejected) + len(part.rerouted)
		n := j.applyAhead(part, func() *kgo.Record { r, _ := part.merge.Pop(); return r }, func(r *kgo.Record) {
			if len(part.rejected)+len(part.rerouted) == kept {
				// Nothing refers to r's bytes any more: the state and the
				// outputs hold copies.
				r.Recycle()
				return
			}
			kept = len(part.rejected) + len(part.rerouted)
		})
		if n > 0 {
			part.active = now
		}
		return n
	}
	busy := j.busy[:0]
	for _, part := range j.parts {
		if part.merge.Buffered() != 0 {
			busy = append(busy, readyPart{part: part})
		}
	}
	j.busy = busy
	if len(busy) <= 1 || j.opts.Parallelism <= 1 {
		n := 0
		for _, b := range busy {
			n += drain(b.part)
		}
		return n
	}
	// The most records to release first: a poll brings records of some
	// partitions only, so their shares differ widely, and the workers
	// finish together only when the largest are not left for last
	// (longest first, as a list scheduler does).
	for i := range busy {
		busy[i].n = busy[i].part.merge.Ready()
	}
	slices.SortFunc(busy, func(a, b readyPart) int { return cmp.Compare(b.n, a.n) })
	var (
		total atomic.Int64
		wg    sync.WaitGroup
		next  atomic.Int64
	)
	for range min(j.opts.Parallelism, len(busy)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(busy)); i = next.Add(1) - 1 {
				total.Add(int64(drain(busy[i].part)))
			}
		})
	}
	wg.Wait()
	return int(total.Load())
}

// readyPart is a partition and how many records its merge can release.
type readyPart struct {
	part *partition
	n    int
}

// throttle pauses the streams that ran ahead in their merges and resumes
// those drained again. The member's lock is held.
func (j *Joiner) throttle() {
	names := j.streamTopics()
	paused, now := logmerge.ThrottleAll(&j.flow, j.member.Client(), names[:], j.parts, (*partition).streams)
	j.m.Pauses.Add(float64(paused))
	j.m.paused.Set(float64(now))
}

// measureBacklog returns the sum of the owned partitions' backlogs, which
// sizes the rounds (logmerge.Rounds). The member's lock is held.
func (j *Joiner) measureBacklog() int64 {
	n := logmerge.BacklogAll(j.parts, (*partition).logs)
	j.m.Backlog.Set(float64(n))
	return n
}

// initCounters looks up the per-stream series once.
func (j *Joiner) initCounters() {
	for s, t := range j.streamTopics() {
		j.eventCounters[s] = j.m.events.WithLabelValues(t)
	}
}

// streamTopics returns the topic of each stream.
func (j *Joiner) streamTopics() [numStreams]string {
	return [numStreams]string{j.opts.Topics.PlatformRecords, j.opts.Topics.Observations, j.opts.Topics.Telemetry, j.opts.Topics.Commands}
}

// stream returns the stream of topic.
func (j *Joiner) stream(topic string) int {
	switch topic {
	case j.opts.Topics.PlatformRecords:
		return streamRecords
	case j.opts.Topics.Observations:
		return streamObservations
	case j.opts.Topics.Telemetry:
		return streamTelemetry
	case j.opts.Topics.Commands:
		return streamCommands
	}
	panic("BUG: joiner consumed topic " + topic)
}
