package stream

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A Processor is a stage's behaviour in a Member: what it does with the
// records of the partitions the member owns. The Member calls it under
// one lock (see the package documentation), per poll and per round,
// never per record.
type Processor interface {
	// Apply processes the records of one poll (the Member reports the
	// poll's fetch errors) and returns how many records it applied and
	// its backlog: the records of the owned partitions not applied yet,
	// which sizes the rounds (logmerge.Rounds), or 0 when it keeps none.
	Apply(ctx context.Context, fetches kgo.Fetches) (applied int, backlog int64)
	// Flush ends a round: what the round's Apply calls produced is
	// written, then the offsets of the records applied are committed
	// (Member.WriteThenCommit). It may leave the write running in the
	// background, one at a time, and return; it then settles it at the
	// next Flush, Settle or Stop. A returned error stops the member: Run
	// returns it.
	Flush(ctx context.Context, r Round) error
	// Settle waits for the writes in flight before the group changes the
	// member's partitions. An error it meets is the next Flush's to
	// return.
	Settle()
	// Restore rebuilds the state of the partitions r names, newly
	// assigned (in the rebalance, or with Options.SettleTime from the
	// poll loop once the group has settled), by replaying their streams up to the group's committed
	// offsets (r.Committed, r.Replay) without writing anything, and then
	// owns them. On error it must keep nothing of them: the Member calls
	// it again, with the offsets read anew, or leaves the group. It is
	// also called, with no partitions, when an assignment brought none:
	// the assignment is complete, and it must not fail.
	Restore(ctx context.Context, r *Restore) error
	// Release drops the state of partitions the member no longer owns.
	// Revoked (lost false), everything applied to them is committed, and
	// the state is exactly the committed one; lost, the new owner may
	// replay what was applied after the last commit.
	Release(partitions []int32, lost bool)
	// Stop is called once when Run ends, before the member leaves the
	// group: the processor settles what it has in flight (a final
	// checkpoint, say) and ends its background work.
	Stop()
}

// Round says what kind of round Flush ends.
type Round struct {
	// CatchUp is set when the round ran past the regular limits of
	// logmerge.Rounds: the member was behind (Behind says whether it
	// still is as the round ends).
	CatchUp bool
	// Behind is set when records were left to apply as the round ended
	// (the backlog of logmerge.Rounds): the member is still catching up,
	// and the next round follows at once. A processor may hold back rows
	// the next rounds would overwrite anyway.
	Behind bool
	// Final is set when the member is stopping (its context is done):
	// Flush returns only once the round is written and committed, or its
	// writes gave up.
	Final bool
}
