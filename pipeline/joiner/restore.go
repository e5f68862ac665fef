package joiner

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// restore rebuilds the state of partitions r.Partitions up to the group's
// committed offsets, through the same merge as the group consumer, so the
// state is exactly the one the previous owner had when it committed. Nothing is
// emitted: those transitions were written before the offsets were
// committed. For each partition, the cheapest exact source is used:
//
//   - the state this joiner kept when the partition was revoked, if
//     nobody committed past it since (a rebalance that gives it back);
//   - else the newest checkpoint at or before the committed offsets
//     (Options.Checkpoints), then a replay of the records after its cut;
//   - else a replay of the three streams from their start.
//
// The streams are replayed only up to the committed offsets, not to their
// end: a record applied ahead of the observations that preceded it would
// move the watermark and change their findings, and the live run after
// the restore would differ from an uninterrupted one. The member's lock
// is held.
func (j *Joiner) restore(ctx context.Context, r *stream.Restore) (map[int32]*partition, error) {
	silent := &output{batch: &sink.Batch{}, m: j.m, emit: false}
	parts := make(map[int32]*partition, len(r.Partitions))
	names := j.streamTopics()
	targets := map[int32][numStreams]int64{}
	from := map[int32][numStreams]int64{}
	var load []int32 // partitions to look up in the checkpoints
	for _, p := range r.Partitions {
		var target [numStreams]int64
		for s, t := range names {
			target[s] = r.Committed(t, p)
		}
		targets[p] = target
		if part := j.kept[p]; part != nil {
			delete(j.kept, p)
			if part.applied() == target {
				part.merge = logmerge.NewMerge(numStreams)
				copy(part.merge.Committed, target[:])
				parts[p], from[p] = part, target
				j.m.restoreKept.Inc()
				continue
			}
		}
		if target == ([numStreams]int64{}) {
			// Nothing committed: nothing to restore, and nothing to
			// replay if this joiner stopped now, so the checkpoint clock
			// starts here. (A partition replayed from the start for want
			// of a checkpoint keeps it at zero: its first seal saves one.)
			part := j.newPartition(p, silent)
			part.cpAt = time.Now()
			parts[p] = part
			continue
		}
		load = append(load, p)
	}
	// Checkpoints load in parallel: each is a few round trips and a
	// decode of its own partition's state.
	type loaded struct {
		part  *partition
		start [numStreams]int64
		ok    bool
	}
	results := make([]loaded, len(load))
	var wg sync.WaitGroup
	for i, p := range load {
		wg.Go(func() {
			part, start, ok := j.fromCheckpoint(ctx, p, targets[p], silent)
			results[i] = loaded{part, start, ok}
		})
	}
	wg.Wait()
	for i, p := range load {
		if r := results[i]; r.ok {
			parts[p], from[p] = r.part, r.start
		} else {
			parts[p] = j.newPartition(p, silent)
		}
	}
	for p, part := range parts {
		part.out = silent
		target := targets[p]
		copy(part.merge.Committed, target[:])
	}
	if err := j.replay(ctx, r, from, targets, parts); err != nil {
		return nil, err
	}
	// Requests a predecessor produced for commands it did not commit are
	// on the requests topic: the live run after the restore does not
	// produce them again (docs/actions.md).
	sent, err := j.producedRequests(ctx)
	if err != nil {
		return nil, err
	}
	for _, part := range parts {
		part.acts.sent = sent
	}
	// From here on the partitions emit into the live batch. The live
	// merge waits for the first records of a stream that has some beyond
	// the committed offset, so the first fetch of another stream does not
	// run ahead of it.
	for p, part := range parts {
		if part.merge.Buffered() != 0 {
			panic("BUG: restore left records in the merge")
		}
		for s, t := range names {
			part.merge.More[s] = r.More(t, p)
		}
		part.merge.SetHold(j.opts.LiveHold, nil) // the replay above held nothing
		part.out, part.dirty = &part.live, true
	}
	return parts, nil
}

// replay reads each stream of parts from from up to (not including)
// targets and applies the records in merge order (stream.Restore.Replay).
func (j *Joiner) replay(ctx context.Context, r *stream.Restore, from, targets map[int32][numStreams]int64, parts map[int32]*partition) error {
	names := j.streamTopics()
	consume := map[string]map[int32]kgo.Offset{}
	ends := map[string]map[int32]int64{}
	for p, target := range targets {
		for s, t := range names {
			parts[p].merge.More[s] = false
			if from[p][s] >= target[s] {
				continue
			}
			if consume[t] == nil {
				consume[t], ends[t] = map[int32]kgo.Offset{}, map[int32]int64{}
			}
			consume[t][p] = kgo.NewOffset().At(from[p][s])
			ends[t][p] = target[s]
			parts[p].merge.More[s] = true
		}
	}
	return r.Replay(ctx, consume, ends,
		func(topic string, p int32, recs []*kgo.Record, unfetched int64) {
			parts[p].merge.Push(j.stream(topic), recs, unfetched)
		},
		func() {
			for _, part := range parts {
				n := 0
				for r, _ := part.merge.Pop(); r != nil; r, _ = part.merge.Pop() {
					j.apply(part, r)
					n++
				}
				j.countEvents(part)
				j.m.RestoreEvents.Add(float64(n))
			}
		})
}
