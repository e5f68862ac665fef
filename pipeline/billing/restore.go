package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// restore rebuilds the state of partitions ps by replaying the usage,
// rated and ledger partitions up to the group's committed offsets, through
// the same merge as the live consumer, so the state is the one the rows
// were written from. Nothing is emitted: those rows were written before
// the offsets were committed. mu is held.
func (r *Reconciler) restore(ctx context.Context, ps []int32) (map[int32]*partition, error) {
	silent := &output{current: map[string]int{}, m: r.m, emit: false}
	parts := make(map[int32]*partition, len(ps))
	for _, p := range ps {
		parts[p] = r.newPartition(p, silent)
	}
	committed, err := r.adm.FetchOffsets(ctx, r.opts.Group)
	if err != nil {
		return nil, fmt.Errorf("fetch committed offsets: %w", err)
	}
	ends, err := r.adm.ListEndOffsets(ctx, r.opts.Topics.Billing()...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	targets := map[string]map[int32]int64{}
	remaining := 0
	consume := map[string]map[int32]kgo.Offset{}
	for _, t := range r.opts.Topics.Billing() {
		for _, p := range ps {
			if o, ok := committed.Lookup(t, p); ok && o.Err == nil && o.At > 0 {
				if targets[t] == nil {
					targets[t], consume[t] = map[int32]int64{}, map[int32]kgo.Offset{}
				}
				targets[t][p] = o.At
				consume[t][p] = kgo.NewOffset().AtStart()
				remaining++
				part := parts[p]
				s := r.stream(t)
				part.merge.more[s] = true
				part.merge.committed[s] = o.At
				part.merge.next[s] = kgo.EpochOffset{Epoch: -1, Offset: o.At}
			}
		}
	}
	if remaining > 0 {
		if err := r.replay(ctx, consume, targets, remaining, parts); err != nil {
			return nil, err
		}
	}
	for _, part := range parts {
		if part.merge.buffered() != 0 {
			panic("BUG: billing restore left records in the merge")
		}
		// The live merge waits for the first records of a stream that has
		// some beyond the committed offset, so the first fetch of another
		// stream does not run ahead of it.
		for s, t := range r.streamTopics() {
			part.merge.more[s] = false
			if o, ok := ends.Lookup(t, part.p); ok && o.Err == nil && o.Offset > part.merge.committed[s] {
				part.merge.more[s] = true
			}
		}
		// The windows as of the committed offsets were written before
		// the commit.
		part.tracker.TakeWindows(nil)
		part.out, part.dirty = &r.out, true
		part.pruned, part.late = part.tracker.Pruned()
	}
	return parts, nil
}

// idleEnd is how long a restore waits for more records below its targets
// before it takes the partitions as fully replayed (the offsets left hold
// only transaction markers).
const idleEnd = 5 * time.Second

// replay pushes every record below its target offset into its partition's
// merge and applies them in merge order.
func (r *Reconciler) replay(ctx context.Context, consume map[string]map[int32]kgo.Offset, targets map[string]map[int32]int64, remaining int, parts map[int32]*partition) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(r.opts.Brokers...),
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}, r.opts.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	done := map[string]map[int32]bool{}
	drain := func() {
		n := r.applyAll(parts, time.Time{})
		r.m.restoreEvents.Add(float64(n))
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
			r.opts.Logger.Warn("restore ended below target offsets (transaction markers only?)", "partitions_left", remaining)
			break
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			part := parts[fp.Partition]
			end := targets[fp.Topic][fp.Partition]
			if part == nil || done[fp.Topic][fp.Partition] {
				return
			}
			recs := fp.Records
			for i, rec := range recs {
				if rec.Offset >= end {
					recs = recs[:i]
					break
				}
			}
			finished := len(fp.Records) > 0 && fp.Records[len(fp.Records)-1].Offset+1 >= end
			part.merge.push(r.stream(fp.Topic), recs, !finished)
			if finished {
				if done[fp.Topic] == nil {
					done[fp.Topic] = map[int32]bool{}
				}
				done[fp.Topic][fp.Partition] = true
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
			}
		})
		drain()
	}
	// Every stream is replayed (or silent): release what waits for none.
	for _, part := range parts {
		part.merge.more = [numStreams]bool{}
	}
	drain()
	return nil
}
