package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream/logmerge"
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
				part.merge.More[s] = true
				part.merge.Committed[s] = o.At
				part.merge.Next[s] = kgo.EpochOffset{Epoch: -1, Offset: o.At}
			}
		}
	}
	if remaining > 0 {
		if err := r.replay(ctx, consume, targets, parts); err != nil {
			return nil, err
		}
	}
	for _, part := range parts {
		if part.merge.Buffered() != 0 {
			panic("BUG: billing restore left records in the merge")
		}
		// The live merge waits for the first records of a stream that has
		// some beyond the committed offset, so the first fetch of another
		// stream does not run ahead of it.
		for s, t := range r.streamTopics() {
			part.merge.More[s] = false
			if o, ok := ends.Lookup(t, part.p); ok && o.Err == nil && o.Offset > part.merge.Committed[s] {
				part.merge.More[s] = true
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

// replay pushes every record below its target offset into its partition's
// merge and applies them in merge order. It waits for the broker as long
// as ctx allows (logmerge.ReadTo never takes a silent partition as done),
// so the state is never left incomplete.
func (r *Reconciler) replay(ctx context.Context, consume map[string]map[int32]kgo.Offset, targets map[string]map[int32]int64, parts map[int32]*partition) error {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{
		kgo.SeedBrokers(r.opts.Brokers...),
		kgo.ConsumePartitions(consume),
	}, logmerge.ReplayOpts()...), r.opts.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	return logmerge.ReadTo(ctx, cl, targets,
		func(topic string, p int32, recs []*kgo.Record, unfetched int64) {
			if part := parts[p]; part != nil {
				part.merge.Push(r.stream(topic), recs, unfetched)
			}
		},
		func() {
			n := r.applyAll(parts)
			r.m.restoreEvents.Add(float64(n))
		})
}
