package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// restore rebuilds the state of partitions ps by replaying the usage,
// rated and ledger partitions up to the group's committed offsets. Nothing
// is emitted: those rows were written before the offsets were committed.
// mu is held.
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
			}
		}
	}
	if remaining > 0 {
		if err := r.replay(ctx, consume, targets, remaining, parts); err != nil {
			return nil, err
		}
	}
	for _, part := range parts {
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

// replay applies, in offset order per topic partition, every record below
// its target offset.
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
			return nil
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			end := targets[fp.Topic][fp.Partition]
			for _, rec := range fp.Records {
				if rec.Offset >= end {
					break
				}
				r.apply(parts, rec)
				r.m.restoreEvents.Inc()
			}
			n := len(fp.Records)
			if n > 0 && fp.Records[n-1].Offset+1 >= end && !done[fp.Topic][fp.Partition] {
				if done[fp.Topic] == nil {
					done[fp.Topic] = map[int32]bool{}
				}
				done[fp.Topic][fp.Partition] = true
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
			}
		})
	}
	return nil
}
