package joiner

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// processor is the Joiner as its stream.Member drives it, under the
// member's lock: a poll's records are merged and applied, partitions in
// parallel; a round is sealed into a batch written in the background
// (flush.go); assigned partitions are restored (restore.go).
type processor Joiner

var _ stream.Processor = (*processor)(nil)

// Apply merges the records of one poll into their partitions' merges and
// applies what the merges release.
func (p *processor) Apply(_ context.Context, fetches kgo.Fetches) (int, int64) {
	j := (*Joiner)(p)
	logmerge.PushAll(fetches, j.parts, (*partition).logs, j.stream)
	n := j.applyAll(time.Now())
	j.m.Late.Add(float64(logmerge.TakeLateAll(j.parts, (*partition).logs)))
	j.m.HoldsExpired.Add(float64(logmerge.TakeHoldsExpiredAll(j.parts, (*partition).logs)))
	j.throttle()
	return n, j.measureBacklog()
}

// Flush seals the round into a batch and starts writing it, once the one
// before is settled; a final one is waited for.
func (p *processor) Flush(ctx context.Context, r stream.Round) error {
	j := (*Joiner)(p)
	if r.CatchUp {
		j.m.CatchUpRounds.Inc()
	}
	err := j.flush(ctx, r)
	if err == nil && ctx.Err() == nil {
		j.advanceIdle(ctx)
	}
	return err
}

// Settle waits for the batch in flight.
func (p *processor) Settle() { (*Joiner)(p).settleInCallback() }

// Restore restores the partitions of r and owns them. The assignment is
// complete (eager range rebalancing): the state kept for partitions that
// did not come back is not needed any more.
func (p *processor) Restore(ctx context.Context, r *stream.Restore) error {
	j := (*Joiner)(p)
	if len(r.Partitions) == 0 {
		clear(j.kept)
		return nil
	}
	restored, err := j.restore(ctx, r)
	if err != nil {
		return err
	}
	clear(j.kept)
	for p, part := range restored {
		j.parts[p] = part
		j.observe(part)
	}
	j.m.Restored(len(j.parts), r.Began)
	return nil
}

// Release drops partitions. A revoked one's state is exactly the
// committed one (its batch was settled) and is kept in case it comes
// back; a lost one may be replayed by its new owner, so its state is
// not kept.
func (p *processor) Release(ps []int32, lost bool) {
	j := (*Joiner)(p)
	for _, p := range ps {
		part := j.parts[p]
		delete(j.parts, p)
		switch {
		case lost:
			delete(j.kept, p)
		case part != nil:
			j.kept[p] = part
		}
	}
	j.m.Assigned.Set(float64(len(j.parts)))
}

// Stop settles the last batch (after a closed client its commit fails; a
// successor replays it), waits for the checkpoint writes, which end with
// their timeout, and closes the marker producer.
func (p *processor) Stop() {
	j := (*Joiner)(p)
	_ = j.settle()
	j.saves.Wait()
	j.markers.Close()
}
