package reconcile

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream"
)

// restore rebuilds the state of partitions rs.Partitions by replaying the
// usage, rated and ledger partitions up to the group's committed offsets,
// through the same merge as the live consumer, so the state is the one the
// rows were written from. Nothing is emitted: those rows were written
// before the offsets were committed. The member's lock is held.
func (r *Reconciler) restore(ctx context.Context, rs *stream.Restore) (map[int32]*partition, error) {
	silent := &output{current: map[string]int{}, m: r.m, emit: false}
	parts := make(map[int32]*partition, len(rs.Partitions))
	for _, p := range rs.Partitions {
		parts[p] = r.newPartition(p, silent)
	}
	targets := map[string]map[int32]int64{}
	consume := map[string]map[int32]kgo.Offset{}
	for _, t := range r.opts.Topics.Billing() {
		for _, p := range rs.Partitions {
			at := rs.Committed(t, p)
			if at == 0 {
				continue
			}
			if targets[t] == nil {
				targets[t], consume[t] = map[int32]int64{}, map[int32]kgo.Offset{}
			}
			targets[t][p] = at
			consume[t][p] = kgo.NewOffset().AtStart()
			part := parts[p]
			s := r.stream(t)
			part.merge.More[s] = true
			part.merge.Committed[s] = at
			part.merge.Next[s] = kgo.EpochOffset{Epoch: -1, Offset: at}
		}
	}
	// Replay pushes every record below its target offset into its
	// partition's merge and applies them in merge order.
	err := rs.Replay(ctx, consume, targets,
		func(topic string, p int32, recs []*kgo.Record, unfetched int64) {
			if part := parts[p]; part != nil {
				s := r.stream(topic)
				n := len(part.merge.Queue[s])
				part.merge.Push(s, recs, unfetched)
				part.pushed[s] += len(part.merge.Queue[s]) - n
			}
		},
		func() {
			n := r.applyAll(parts)
			compactQueues(parts)
			r.m.RestoreEvents.Add(float64(n))
		})
	if err != nil {
		for _, part := range parts {
			part.tracker.close()
		}
		return nil, err
	}
	for _, part := range parts {
		if part.merge.Buffered() != 0 {
			panic("BUG: billing restore left records in the merge")
		}
		for s, t := range r.streamTopics() {
			part.merge.More[s] = rs.More(t, part.p)
		}
		part.merge.SetHold(r.opts.LiveHold, nil) // the replay above held nothing
		// The windows as of the committed offsets were written before
		// the commit.
		part.tracker.TakeWindows(nil)
		part.out, part.dirty = &r.out, true
		part.pruned, part.late = part.tracker.Pruned()
	}
	return parts, nil
}
