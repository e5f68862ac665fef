package logmerge

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReplayOpts are the options a client needs for ReadTo: read committed,
// and keep the transaction markers, whose offsets tell exactly when a
// partition whose last records before its target are markers (a
// transactional producer's commit) has been read to the target.
func ReplayOpts() []kgo.Opt {
	return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
}

// ReadTo polls cl, which consumes exactly the partitions of ends from the
// offsets its caller chose (with ReplayOpts), until each partition has
// been read up to its end offset (exclusive). For every fetched partition
// it calls deliver with its data records below the end (markers and
// records at or past the end dropped) and how many offsets remain below
// the end after them (more than 0: more records to come), then calls drained once per poll, so the caller can apply what its
// merges release. A partition that reached its end is paused.
//
// It never guesses that a partition is done: a broker that is down or
// slow makes it wait, until ctx ends (an error naming how many partitions
// were left), so a restore never ends with part of the state missing.
func ReadTo(ctx context.Context, cl *kgo.Client, ends map[string]map[int32]int64,
	deliver func(topic string, partition int32, recs []*kgo.Record, unfetched int64), drained func()) error {
	remaining := 0
	for _, ps := range ends {
		remaining += len(ps)
	}
	done := map[string]map[int32]bool{}
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("replay: %d partitions not read to their target in time: %w", remaining, err)
		}
		if fetches.IsClientClosed() {
			return errors.New("replay: client closed")
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("replay fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			end, ok := ends[fp.Topic][fp.Partition]
			if !ok || done[fp.Topic][fp.Partition] || len(fp.Records) == 0 {
				return
			}
			below := fp.Records
			for i, r := range below {
				if r.Offset >= end {
					below = below[:i]
					break
				}
			}
			recs := Data(below)
			after := fp.Records[len(fp.Records)-1].Offset + 1
			reached := after >= end
			deliver(fp.Topic, fp.Partition, recs, max(0, end-after))
			if reached {
				if done[fp.Topic] == nil {
					done[fp.Topic] = map[int32]bool{}
				}
				done[fp.Topic][fp.Partition] = true
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
			}
		})
		drained()
	}
	return nil
}
