package rater

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream"
)

// processor is the Rater as its stream.Member drives it, under the
// member's lock: a round is one poll of at most MaxBatch records, rated
// and ended in one transaction; assigned partitions' keys are restored
// (restore.go).
type processor Rater

var _ stream.Processor = (*processor)(nil)

// Apply begins the round's transaction and produces the outputs of the
// poll's records.
func (p *processor) Apply(ctx context.Context, fetches kgo.Fetches) (int, int64) {
	n := fetches.NumRecords()
	if n > 0 {
		(*Rater)(p).begin(ctx, fetches)
	}
	return n, 0
}

// Flush ends the round's transaction, then paces the collector.
func (p *processor) Flush(context.Context, stream.Round) error {
	r := (*Rater)(p)
	err := r.end()
	r.gc.AfterRound()
	return err
}

// Settle has nothing to wait for: a round ends before a rebalance, and
// one the group revoked partitions under is aborted by the session.
func (p *processor) Settle() {}

// Restore rebuilds the usage-key state of the partitions of rs.
func (p *processor) Restore(ctx context.Context, rs *stream.Restore) error {
	r := (*Rater)(p)
	if len(rs.Partitions) == 0 {
		return nil
	}
	if err := r.restore(ctx, rs); err != nil {
		return err
	}
	r.setKeys()
	r.m.Restored(len(r.state.parts), rs.Began)
	return nil
}

// Release drops the state of revoked or lost partitions.
func (p *processor) Release(ps []int32, _ bool) {
	r := (*Rater)(p)
	for _, p := range ps {
		r.state.drop(p)
	}
	r.m.Assigned.Set(float64(len(r.state.parts)))
	r.setKeys()
}

// Stop has nothing in flight: Run ended the last round.
func (p *processor) Stop() {}
