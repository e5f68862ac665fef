// Package logmerge merges the co-partitioned streams of one partition
// number (one topic partition each) into one order that depends only on the
// logs' contents: the next record is always the head, among the streams,
// with the earliest Kafka timestamp (ties go to the lower stream index),
// and the merge waits while a stream that has more records below its end
// has none buffered. A group consumer (in whatever chunks the fetches
// bring), a restore and a fresh replay therefore apply the same records in
// the same order. The one exception is the live tail: a stream that is
// caught up cannot say that a record with an earlier timestamp is still in
// flight to the broker; such a record is applied when it arrives, unless
// the Merge holds its releases for it (Merge.SetHold, hold.go).
//
// The drift joiner and the billing reconciler both order their partitions
// with it, each keeping a Merge per partition number.
package logmerge

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Streams is a view of the merge state of n streams, held by the caller
// (slices of its arrays): the three slices have one element per stream.
type Streams struct {
	// Queue holds the polled, not yet applied records of each stream, in
	// offset order.
	Queue [][]*kgo.Record
	// More says the stream has records beyond those queued (below the
	// fetch's last stable offset, or below a restore's target).
	More []bool
	// Paused says the stream's fetching is paused (see Throttle); nil
	// when the caller does not throttle.
	Paused []bool
}

// Push queues records of stream s; more says the stream has records
// beyond them.
func (m Streams) Push(s int, recs []*kgo.Record, more bool) {
	m.Queue[s] = append(m.Queue[s], recs...)
	m.More[s] = more
}

// Pop returns the next record in merge order and its stream, or nil and -1
// when the queues are empty or the merge must wait for a stream that has
// more records. The consumer's positions must be exact for that wait to
// end: read with kgo.KeepControlRecords (see Data), so that a stream whose
// last records are transaction markers is known to be read to its end.
func (m Streams) Pop() (*kgo.Record, int) {
	best := -1
	for s := range m.Queue {
		if len(m.Queue[s]) == 0 {
			if m.More[s] {
				return nil, -1
			}
			continue
		}
		if best < 0 || m.Queue[s][0].Timestamp.Before(m.Queue[best][0].Timestamp) {
			best = s // equal timestamps: the lower stream, found first, wins
		}
	}
	if best < 0 {
		return nil, -1
	}
	r := m.Queue[best][0]
	m.Queue[best][0] = nil
	m.Queue[best] = m.Queue[best][1:]
	return r, best
}

// Buffered reports how many records are queued.
func (m Streams) Buffered() int {
	n := 0
	for _, q := range m.Queue {
		n += len(q)
	}
	return n
}

// Ready reports how many records Pop would return before it has to wait
// (or the queues run empty): those that come, in merge order, no later
// than the last queued record of the first stream with more records to
// run empty. It assumes each stream's timestamps do not go back (a
// producer's clock normally does not); where one does, it is an estimate,
// which may be 0 while Pop returns a record. A consumer that applies
// partitions in parallel starts the ones with the most work first with
// it.
func (m Streams) Ready() int {
	end := -1 // the stream whose last queued record ends the release
	for s, q := range m.Queue {
		if !m.More[s] {
			continue
		}
		if len(q) == 0 {
			return 0
		}
		if end < 0 || q[len(q)-1].Timestamp.Before(m.Queue[end][len(m.Queue[end])-1].Timestamp) {
			end = s
		}
	}
	if end < 0 {
		return m.Buffered()
	}
	last := m.Queue[end][len(m.Queue[end])-1].Timestamp
	n := 0
	for s, q := range m.Queue {
		// Records of s released before the last of end: those earlier,
		// and, at an equal timestamp, those of a lower stream (end's own
		// included).
		n += sort.Search(len(q), func(i int) bool {
			t := q[i].Timestamp
			return t.After(last) || t.Equal(last) && s > end
		})
	}
	return n
}

// Data returns recs without their transaction markers (a consumer with
// kgo.KeepControlRecords receives them: their offsets tell that a
// partition was read to its end). It allocates only when there are some.
func Data(recs []*kgo.Record) []*kgo.Record {
	for i, r := range recs {
		if r.Attrs.IsControl() {
			out := make([]*kgo.Record, i, len(recs)-1)
			copy(out, recs[:i])
			for _, r := range recs[i+1:] {
				if !r.Attrs.IsControl() {
					out = append(out, r)
				}
			}
			return out
		}
	}
	return recs
}

// Commit commits offsets (the merge positions of a consumer's partitions:
// the offset after the last record applied, not the fetch position)
// through cl's group session, synchronously, and returns the first error
// of the request or of any partition. A failed commit means the records
// after the previous commit are replayed, which an idempotent consumer
// absorbs.
func Commit(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	var failed error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && failed == nil {
					failed = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	return failed
}

// Fetched hands each fetched partition with records to push: its data
// records (transaction markers dropped) and how many offsets lie between
// the last of them and the fetch's last stable offset (its high watermark
// when the broker gives none): more than 0 when the partition has more
// records. The last offset counts markers too (the consumer keeps them:
// kgo.KeepControlRecords), so that count is exact and the merge never has
// to guess that a silent stream is done. Fetch errors are passed to warn,
// except those of a poll's own deadline or cancellation; a nil warn
// leaves them to the caller (a stream.Member reports them itself).
func Fetched(fetches kgo.Fetches, push func(topic string, partition int32, recs []*kgo.Record, unfetched int64), warn func(topic string, partition int32, err error)) {
	if warn != nil {
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				warn(t, p, err)
			}
		})
	}
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		end := fp.LastStableOffset
		if end < 0 {
			end = fp.HighWatermark
		}
		last := fp.Records[len(fp.Records)-1].Offset
		push(fp.Topic, fp.Partition, Data(fp.Records), max(0, end-(last+1)))
	})
}
