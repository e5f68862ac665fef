package joiner

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// A batch is one sealed round: everything the owned partitions applied
// since the previous seal. It is written and committed in the background
// while the poll loop applies the next round, so ClickHouse's insert and
// the commit's round trip overlap the CPU work of decoding and
// classifying. One batch is in flight at a time and each is settled
// before the next is sealed, so batches are written and committed in
// order, and a crash loses at most the uncommitted tail, replayed
// idempotently as before.
type batch struct {
	// parts are the outputs of the partitions (rows, summaries,
	// progress), written as one: each table in one insert.
	parts []*sink.Batch
	// rejected are the invalid records, quarantined before the commit.
	rejected []rejected
	// rerouted are the mis-partitioned records, moved to their partition
	// before the commit.
	rerouted []*kgo.Record
	// requests are the records of reconcile.requests the batch's actions
	// made, produced before the commit.
	requests []*kgo.Record
	// offsets are the positions to commit: per topic and partition, the
	// offset after the last record applied.
	offsets map[string]map[int32]kgo.EpochOffset
	// saves are the checkpoints taken at the seal, saved once the batch is
	// committed (their state is exactly its cut).
	saves []save

	done      chan struct{} // closed when the write is over
	committed bool          // the offsets are committed (or there were none)
	err       error         // the write gave up (the joiner is stopping)
	final     bool          // the joiner's last batch before it stops
}

// reset empties b; its parts, emptied, go to free for the partitions to
// fill again.
func (b *batch) reset(free []*sink.Batch) []*sink.Batch {
	for _, out := range b.parts {
		out.Reset()
		out.Current, out.Nodes = sink.Packed[drift.Finding]{}, sink.Packed[nodeagent.Status]{} // heldRows.moveTo
		free = append(free, out)
	}
	clear(b.parts)
	b.parts = b.parts[:0]
	clear(b.rejected)
	clear(b.rerouted)
	clear(b.saves)
	clear(b.requests)
	b.requests = b.requests[:0]
	b.rejected, b.rerouted, b.saves = b.rejected[:0], b.rerouted[:0], b.saves[:0]
	b.offsets, b.done, b.committed, b.err, b.final = nil, nil, false, nil, false
	return free
}

// rows returns the current finding rows of b and whether b writes
// nothing.
func (b *batch) rows() (current int, empty bool) {
	empty = true
	for _, out := range b.parts {
		current += out.Current.Len()
		empty = empty && out.Empty()
	}
	return current, empty
}

// flush settles the batch in flight, seals what was applied since into
// the next one and starts writing it. When final (the joiner is stopping)
// it waits for that write as well. The member's lock is held.
func (j *Joiner) flush(ctx context.Context, r stream.Round) error {
	final := r.Final
	if err := j.settle(); err != nil {
		return err
	}
	if err := j.failed; err != nil {
		j.failed = nil
		return err
	}
	b := j.seal(r)
	j.inflight = b
	go j.write(ctx, b)
	j.opts.GC.AfterRound()
	if final {
		return j.settle()
	}
	return nil
}

// seal moves the partitions' outputs, progress and due checkpoints into a
// new batch with the offsets that cover them. The member's lock is held.
func (j *Joiner) seal(r stream.Round) *batch {
	final := r.Final
	b := j.spare
	if b == nil {
		b = &batch{}
	}
	j.spare = nil
	b.done, b.final = make(chan struct{}), final
	names := j.streamTopics()
	now := time.Now()
	for p, part := range j.parts {
		j.sealPartition(part, b, now)
		b.offsets = part.merge.Uncommitted(p, names[:], b.offsets)
	}
	j.snapshots(b, final)
	j.sealHeld(b, r, now)
	if final {
		j.dropRowBuffers()
	}
	return b
}

// sealPartition moves what part produced since the last seal into b,
// but for its held rows, summaries and progress row (sealHeld, once the
// checkpoints are known). The member's lock is held.
func (j *Joiner) sealPartition(part *partition, b *batch, now time.Time) {
	out := j.gather(part, b)
	part.progressDue = part.progressDue || part.dirty || now.Sub(part.progressAt) >= progressRefresh
	if part.dirty {
		part.summariesDue = true
		out.Producers = readmodel.AppendProducerRejections(out.Producers, j.opts.Group, part.p, &part.producers)
		j.observe(part)
		part.dirty = false
	}
	j.sealing = append(j.sealing, sealedPart{part, out})
}

// sealedPart is a partition with its part of the batch being sealed.
type sealedPart struct {
	part *partition
	out  *sink.Batch
}

// sealHeld moves the rows each partition holds (heldRows: its findings'
// and nodes' current rows) into its part of b, with its summaries and
// its progress row. While the joiner is behind (r.Behind), a partition
// keeps them for up to Options.CatchUpHold, and all partitions together
// at most Options.CatchUpHoldRows: a catch-up round has a new row for
// nearly every node and for many findings, which the next round's
// overwrites. The summaries (finding counts, finding and node
// tops) wait with the rows, so that they never claim more than
// drift_evidence and node_agent_status hold, and so does the progress
// row, so that consumer_progress never claims a watermark whose rows are
// not written (read-your-writes). The rows go into b anyway with the
// partition's checkpoint, so that a restore from it, which replays and
// emits again only what came after it, leaves no row unwritten, and
// with the joiner's last batch. The member's lock is held.
func (j *Joiner) sealHeld(b *batch, r stream.Round, now time.Time) {
	held := 0
	for i := range j.sealing {
		held += j.sealing[i].part.held.len()
	}
	mayHold := r.Behind && !r.Final && j.opts.CatchUpHold > 0 && held <= j.opts.CatchUpHoldRows
	held = 0
	for i := range j.sealing {
		part, out := j.sealing[i].part, j.sealing[i].out
		if n := part.held.len(); n != 0 {
			if mayHold && j.holds(part, b, now) {
				held += n
				continue
			}
			part.held.moveTo(out, now)
		}
		if part.summariesDue {
			part.summary.flush(part.p, out)
			part.nodeTop.flush(part.p, out)
			part.summariesDue = false
		}
		if part.progressDue {
			out.Progress = append(out.Progress, j.progress(part))
			part.progressAt, part.progressDue = now, false
		}
	}
	clear(j.sealing)
	j.sealing = j.sealing[:0]
	j.m.held.Set(float64(held))
}

// holds reports whether part, in a seal that may hold rows, keeps them
// past the seal of b: its hold has not run out and b does not checkpoint
// it (see sealHeld).
func (j *Joiner) holds(part *partition, b *batch, now time.Time) bool {
	return now.Sub(part.held.at) < j.opts.CatchUpHold &&
		!slices.ContainsFunc(b.saves, func(sv save) bool { return sv.part == part })
}

// progressRefresh is how often a partition's progress row is written
// while nothing changes it: the row says the partition is still owned
// and where it stands, and retention deletes the rows of a partition
// that has written none for days (a group renamed, partitions removed),
// not those of a partition whose producers went quiet.
const progressRefresh = time.Hour

// dropRowBuffers lets the collector take the row buffers kept for the
// next rounds (the emptied outputs and each partition's live one keep
// the chunks of the largest round they held, some 0.5 GB after a
// catch-up at 10M events): a final seal is followed by no round, only by
// the snapshots of every changed partition, which can use that memory.
// The member's lock is held.
func (j *Joiner) dropRowBuffers() {
	clear(j.freeParts)
	j.freeParts = j.freeParts[:0]
	for _, part := range j.parts {
		part.live.batch = &sink.Batch{}
	}
}

// write quarantines, reroutes and writes b (each retried until it
// succeeds or, once ctx is done, for a bounded time), then commits its
// offsets, also of records that wrote nothing (duplicates), or the group
// would never catch up (stream.Member.WriteThenCommit); the findings are
// in ClickHouse by then, and a failed commit only means a replay of the
// batch, which writes the same rows again. Checkpoints taken at the seal
// are saved after the commit. It runs in its own goroutine, without the
// member's lock.
func (j *Joiner) write(ctx context.Context, b *batch) {
	defer close(b.done)
	defer func() {
		if b.final {
			// Written or given up: the rows go before the snapshots of
			// the stop are taken (dropRowBuffers), and a collection
			// frees them now, so that the snapshots reuse their memory.
			// Without it the heap, grown towards its goal by the last
			// round, took the snapshots' buffers on top and the stop
			// was the process's peak of RSS, 1 GB above that of the
			// catch-up at 10M events.
			clear(b.parts)
			b.parts = b.parts[:0]
			if b.committed && len(b.saves) > 0 {
				debug.FreeOSMemory()
			}
		}
		j.save(b.saves, b.committed)
	}()
	rows, empty := b.rows()
	rerouted := j.rerouteCopies(b.rerouted)
	b.committed, b.err = j.member.WriteThenCommit(ctx, b.offsets,
		stream.Write{What: "quarantine invalid records", Do: func(ctx context.Context) error {
			return j.quarantine(ctx, b.rejected)
		}},
		stream.Write{What: "reroute mis-partitioned records", Do: func(ctx context.Context) error {
			if len(rerouted) == 0 {
				return nil
			}
			return j.opts.Reroute.ProduceSync(ctx, rerouted...).FirstErr()
		}},
		stream.Write{What: "write findings to ClickHouse", Do: func(ctx context.Context) error {
			if empty {
				return nil
			}
			start := time.Now()
			if err := j.sink.Write(ctx, b.parts...); err != nil {
				j.m.flushErrors.Inc()
				return err
			}
			j.m.flushSeconds.Observe(time.Since(start).Seconds())
			j.m.flushRows.Observe(float64(rows))
			return nil
		}},
		stream.Write{What: "write requests to the platform's controllers", Do: func(ctx context.Context) error {
			if len(b.requests) == 0 || j.opts.Requests == nil {
				return nil
			}
			if err := j.opts.Requests.ProduceSync(ctx, b.requests...).FirstErr(); err != nil {
				return err
			}
			j.m.requests.Add(float64(len(b.requests)))
			return nil
		}})
}

// settle waits for the batch in flight, records its commit in the
// partitions still owned, and returns the error of a write that gave up.
// The member's lock is held.
func (j *Joiner) settle() error {
	b := j.inflight
	if b == nil {
		return nil
	}
	<-b.done
	j.inflight = nil
	if b.committed {
		names := j.streamTopics()
		logmerge.CommittedAll(b.offsets, names[:], j.parts, (*partition).logs)
	}
	err := b.err
	j.freeParts = b.reset(j.freeParts)
	if n := len(j.parts); len(j.freeParts) > n {
		// Partitions were revoked: keep the buffers of as many parts as
		// the next seal takes.
		clear(j.freeParts[n:])
		j.freeParts = j.freeParts[:n]
	}
	j.spare = b
	return err
}

// settleInCallback settles the batch in flight before a group callback
// changes the partitions; an error is returned by the next flush. The
// member's lock is held.
func (j *Joiner) settleInCallback() {
	if err := j.settle(); err != nil && j.failed == nil {
		j.failed = err
	}
}

// HeaderReroutedFrom marks a record the joiner moved to the partition its
// key hashes to: "<topic>/<partition>/<offset>" of the original.
const HeaderReroutedFrom = contract.HeaderReroutedFrom

// rerouteCopies returns the copies of the mis-partitioned records that
// write produces to the partition their key hashes to (the record
// partitioner of Options.Reroute), each saying where it came from; their
// offsets are committed only afterwards. A retry may write a record
// twice; the copies share their dedupe identity, so the owner of the
// right partition applies it once.
func (j *Joiner) rerouteCopies(recs []*kgo.Record) []*kgo.Record {
	if len(recs) == 0 {
		return nil
	}
	copies := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		headers := append(r.Headers[:len(r.Headers):len(r.Headers)], kgo.RecordHeader{Key: HeaderReroutedFrom,
			Value: fmt.Appendf(nil, "%s/%d/%d", r.Topic, r.Partition, r.Offset)})
		copies[i] = &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: headers, Timestamp: r.Timestamp}
	}
	return copies
}

// quarantine writes the rejected records to the quarantine topic and
// waits for the broker; their offsets are committed only afterwards, so
// none is lost (a retry may write one twice, which is harmless).
func (j *Joiner) quarantine(ctx context.Context, recs []rejected) error {
	if len(recs) == 0 || j.opts.Quarantine == nil {
		return nil
	}
	for _, r := range recs {
		j.opts.Quarantine.Produce(ctx, r.rec, r.verr)
	}
	return j.opts.Quarantine.Flush(ctx)
}
