package joiner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// restore rebuilds the state of partitions ps by replaying the records,
// observations and telemetry partitions from their start up to the
// group's committed offsets, through the same merge as the group
// consumer, so the state is exactly the one the previous owner had when
// it committed. Nothing is emitted: those transitions were written before
// the offsets were committed. mu is held.
//
// The records are replayed only up to the committed offset, not to their
// end: a record applied ahead of the observations that preceded it would
// move the watermark and change their findings, and the live run after
// the restore would differ from an uninterrupted one.
func (j *Joiner) restore(ctx context.Context, ps []int32) (map[int32]*partition, error) {
	silent := &output{current: make(map[string]int), nodes: make(map[string]int), m: j.m, emit: false}
	parts := make(map[int32]*partition, len(ps))
	for _, p := range ps {
		parts[p] = j.newPartition(p, silent)
	}
	committed, err := j.adm.FetchOffsets(ctx, j.opts.Group)
	if err != nil {
		return nil, fmt.Errorf("fetch committed offsets: %w", err)
	}
	names := j.streamTopics()
	ends, err := j.adm.ListEndOffsets(ctx, names[:]...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	targets := map[string]map[int32]int64{}
	for _, p := range ps {
		for s, t := range names {
			target := int64(0)
			if o, ok := committed.Lookup(t, p); ok && o.Err == nil && o.At > 0 {
				target = o.At
			}
			if targets[t] == nil {
				targets[t] = map[int32]int64{}
			}
			targets[t][p] = target
			parts[p].merge.committed[s] = target
			// The live merge waits for the first records of a stream that
			// has some beyond the committed offset, so the first fetch of
			// another stream does not run ahead of it.
			if o, ok := ends.Lookup(t, p); ok && o.Err == nil && o.Offset > target {
				parts[p].merge.more[s] = true
			}
		}
	}
	live := make(map[int32][numStreams]bool, len(parts))
	for p, part := range parts {
		live[p] = part.merge.more
		part.merge.more = [numStreams]bool{}
	}
	if err := j.replay(ctx, targets, parts); err != nil {
		return nil, err
	}
	// From here on the partitions emit into the live batch.
	for p, part := range parts {
		if part.merge.buffered() != 0 {
			panic("BUG: restore left records in the merge")
		}
		part.merge.more = live[p]
		part.out, part.dirty = &j.out, true
	}
	return parts, nil
}

// idleEnd is how long a restore waits for more records below its targets
// before it takes the partitions as fully replayed.
const idleEnd = 5 * time.Second

// replay reads each topic partition of targets from its start up to (not
// including) the target offset and applies the records in merge order.
func (j *Joiner) replay(ctx context.Context, targets map[string]map[int32]int64, parts map[int32]*partition) error {
	consume := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for t, ps := range targets {
		s := j.stream(t)
		for p, end := range ps {
			if end <= 0 {
				continue
			}
			if consume[t] == nil {
				consume[t] = map[int32]kgo.Offset{}
			}
			consume[t][p] = kgo.NewOffset().AtStart()
			parts[p].merge.more[s] = true
			remaining++
		}
	}
	if remaining == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(j.opts.Brokers...),
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}, j.opts.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	drain := func() {
		for _, part := range parts {
			for r, _ := part.merge.pop(time.Time{}); r != nil; r, _ = part.merge.pop(time.Time{}) {
				j.apply(part, r)
				j.m.restoreEvents.Inc()
			}
		}
	}
	for remaining > 0 {
		pctx, pcancel := context.WithTimeout(ctx, idleEnd)
		fetches := cl.PollFetches(pctx)
		pcancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore: %d partitions not replayed in time: %w", remaining, err)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("restore fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		if fetches.Empty() {
			// Nothing more arrived below the targets for idleEnd: the
			// offsets left hold only transaction markers, which carry no
			// events.
			j.opts.Logger.Warn("restore ended below target offsets (transaction markers only?)", "partitions_left", remaining)
			for _, part := range parts {
				part.merge.more = [numStreams]bool{}
			}
			drain()
			return nil
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			s, end := j.stream(fp.Topic), targets[fp.Topic][fp.Partition]
			m := &parts[fp.Partition].merge
			if !m.more[s] || len(fp.Records) == 0 {
				return
			}
			recs := fp.Records
			for len(recs) > 0 && recs[len(recs)-1].Offset >= end {
				recs = recs[:len(recs)-1]
			}
			reached := fp.Records[len(fp.Records)-1].Offset+1 >= end
			m.push(s, recs, !reached)
			if reached {
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
			}
		})
		drain()
	}
	return nil
}
