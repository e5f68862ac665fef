package reconcile

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// processor is the Reconciler as its stream.Member drives it, under the
// member's lock: a poll's records are merged and applied, a round is
// written and committed before the next begins, and assigned partitions
// are restored (restore.go).
type processor Reconciler

var _ stream.Processor = (*processor)(nil)

// Apply merges the records of one poll into their partitions' merges and
// applies what the merges release.
func (p *processor) Apply(_ context.Context, fetches kgo.Fetches) (int, int64) {
	r := (*Reconciler)(p)
	r.noteMarkers(fetches)
	markQueues(r.parts)
	logmerge.PushAll(fetches, r.parts, (*partition).logs, r.stream)
	countPushed(r.parts)
	n := r.applyAll(r.parts)
	r.behind.Store(r.out.full() || r.anyBehind())
	r.m.Late.Add(float64(logmerge.TakeLateAll(r.parts, (*partition).logs)))
	r.m.HoldsExpired.Add(float64(logmerge.TakeHoldsExpiredAll(r.parts, (*partition).logs)))
	compactQueues(r.parts)
	r.passMarkers()
	r.throttle()
	backlog := logmerge.BacklogAll(r.parts, (*partition).logs)
	r.m.Backlog.Set(float64(backlog))
	return n, backlog
}

// Flush writes the round's rows and commits its offsets.
func (p *processor) Flush(ctx context.Context, rd stream.Round) error {
	r := (*Reconciler)(p)
	if rd.CatchUp {
		r.m.CatchUpRounds.Inc()
	}
	err := r.flush(ctx)
	r.gc.AfterRound()
	return err
}

// Settle has nothing to wait for: Flush writes in the poll loop.
func (p *processor) Settle() {}

// Restore restores the partitions of rs and owns them.
func (p *processor) Restore(ctx context.Context, rs *stream.Restore) error {
	r := (*Reconciler)(p)
	if len(rs.Partitions) == 0 {
		return nil
	}
	restored, err := r.restore(ctx, rs)
	if err != nil {
		return err
	}
	for p, part := range restored {
		r.parts[p] = part
		r.observe(part)
	}
	r.m.Restored(len(r.parts), rs.Began)
	return nil
}

// Release drops partitions, revoked or lost alike: a partition that comes
// back is restored anew.
func (p *processor) Release(ps []int32, _ bool) {
	r := (*Reconciler)(p)
	for _, p := range ps {
		if part := r.parts[p]; part != nil {
			part.tracker.close()
		}
		delete(r.parts, p)
		for _, g := range []*prometheus.GaugeVec{r.m.open, r.m.watermark, r.m.trackedUsage, r.m.trackedWindows} {
			g.DeleteLabelValues(strconv.Itoa(int(p)))
		}
	}
	r.m.Assigned.Set(float64(len(r.parts)))
}

// Stop has nothing in flight.
func (p *processor) Stop() {}

// noteMarkers remembers the position after the last transaction marker
// of each stream in fetches.
func (r *Reconciler) noteMarkers(fetches kgo.Fetches) {
	fetches.EachPartition(func(ft kgo.FetchTopicPartition) {
		part, ok := r.parts[ft.Partition]
		if !ok {
			return
		}
		s := r.stream(ft.Topic)
		for _, rec := range ft.Records {
			if rec.Attrs.IsControl() && rec.Offset >= part.marker[s].Offset {
				part.marker[s] = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}
			}
		}
	})
}

// passMarkers moves each stream whose queue is empty past the markers
// fetched after its last applied record: every record before them is
// applied, so the group's committed offsets reach the end of a topic
// whose last records are markers, and its lag reads 0.
func (r *Reconciler) passMarkers() {
	for _, part := range r.parts {
		q := part.merge.Streams().Queue
		for s, m := range part.marker {
			if len(q[s]) == 0 && m.Offset > part.merge.Next[s].Offset {
				part.merge.Next[s] = m
			}
		}
	}
}

// The records a merge holds back (a stream ahead of the others waits for
// them) would keep alive the whole decompressed fetch buffer their bytes
// alias, and the array of records the client decoded them into, most of
// both records already applied: queues of 16,384 rated lines held
// hundreds of megabytes of buffers. After each apply, the records pushed
// by the poll that still wait are copied, with their keys and values,
// into allocations of their own (one per stream), and the buffers go with
// the records applied.

// markQueues notes the queue lengths before a push.
func markQueues(parts map[int32]*partition) {
	for _, part := range parts {
		for s, q := range part.merge.Queue {
			part.pushed[s] = -len(q)
		}
	}
}

// countPushed turns the lengths markQueues noted into the number of
// records pushed since.
func countPushed(parts map[int32]*partition) {
	for _, part := range parts {
		for s, q := range part.merge.Queue {
			part.pushed[s] += len(q)
		}
	}
}

// compactQueues copies the keys and values of the records pushed since
// markQueues that are still queued (the tail of each queue: the merge
// pops from the front).
func compactQueues(parts map[int32]*partition) {
	for _, part := range parts {
		for s, q := range part.merge.Queue {
			n := min(part.pushed[s], len(q))
			part.pushed[s] = 0
			if n > 0 {
				detach(q[len(q)-n:])
			}
		}
	}
}

// detach replaces recs by copies whose records, keys and values are
// their own.
func detach(recs []*kgo.Record) {
	size := 0
	for _, rec := range recs {
		size += len(rec.Key) + len(rec.Value)
	}
	buf := make([]byte, 0, size)
	copies := make([]kgo.Record, len(recs))
	for i, rec := range recs {
		c := &copies[i]
		*c = *rec
		c.Key, buf = own(buf, rec.Key)
		c.Value, buf = own(buf, rec.Value)
		recs[i] = c
	}
}

// own appends b to buf and returns the copy (nil stays nil) and buf.
func own(buf, b []byte) ([]byte, []byte) {
	if b == nil {
		return nil, buf
	}
	at := len(buf)
	buf = append(buf, b...)
	return buf[at:len(buf):len(buf)], buf
}
