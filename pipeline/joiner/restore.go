package joiner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// restore rebuilds the state of partitions ps: the compacted records
// partitions to their end first (desired state), then the observations
// and telemetry partitions up to the group's committed offsets. Nothing
// is emitted: those transitions were written before the offsets were
// committed. mu is held.
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
	recordsEnd, err := j.adm.ListEndOffsets(ctx, j.opts.Topics.PlatformRecords)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	phases := []map[string]map[int32]int64{{j.opts.Topics.PlatformRecords: {}}, {j.opts.Topics.Observations: {}, j.opts.Topics.Telemetry: {}}}
	for _, p := range ps {
		if o, ok := recordsEnd.Lookup(j.opts.Topics.PlatformRecords, p); ok && o.Err == nil {
			phases[0][j.opts.Topics.PlatformRecords][p] = o.Offset
			parts[p].recordsRestored = o.Offset
		}
		for _, t := range []string{j.opts.Topics.Observations, j.opts.Topics.Telemetry} {
			if o, ok := committed.Lookup(t, p); ok && o.Err == nil && o.At > 0 {
				phases[1][t][p] = o.At
			}
		}
	}
	for _, targets := range phases {
		if err := j.replay(ctx, targets, parts); err != nil {
			return nil, err
		}
	}
	// From here on the partitions emit into the live batch.
	for _, part := range parts {
		part.out, part.dirty = &j.out, true
	}
	return parts, nil
}

// idleEnd is how long a restore waits for more records below its targets
// before it takes the partitions as fully replayed.
const idleEnd = 5 * time.Second

// replay reads each topic partition of targets from its start up to (not
// including) the target offset and applies the records in offset order.
func (j *Joiner) replay(ctx context.Context, targets map[string]map[int32]int64, parts map[int32]*partition) error {
	consume := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for t, ps := range targets {
		for p, end := range ps {
			if end <= 0 {
				continue
			}
			if consume[t] == nil {
				consume[t] = map[int32]kgo.Offset{}
			}
			consume[t][p] = kgo.NewOffset().AtStart()
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
			// Nothing more arrived below the targets for idleEnd: the
			// offsets left hold only transaction markers, which carry no
			// events.
			j.opts.Logger.Warn("restore ended below target offsets (transaction markers only?)", "partitions_left", remaining)
			return nil
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			end := targets[fp.Topic][fp.Partition]
			for _, r := range fp.Records {
				if r.Offset >= end {
					break
				}
				j.apply(parts[fp.Partition], r)
				j.m.restoreEvents.Inc()
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
