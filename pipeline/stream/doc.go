// Package stream is the consumer-group core the pipeline's stages share:
// a Member is one member of a Kafka consumer group over co-partitioned
// topics, and a Processor is what a stage (the drift joiner, the billing
// reconciler, the rater) does with the records of the partitions it owns.
// The Member owns everything else: the clients, the fetch limits, the
// poll loop, rebalances, restores and the order of writes and commits.
// The subpackages are its building blocks: logmerge (one order over a
// partition's streams, rounds, throttling), retry (the backoff loop),
// checkpoint and snap (partition state snapshots), topics (names and
// co-partitioning).
//
// # Rounds
//
// The poll loop runs in rounds. A round polls (for a logmerge.Rounds
// interval or record count, or once for Options.PollRecords), hands each
// poll's records to Processor.Apply, then ends with Processor.Flush. While
// a round runs, the group cannot rebalance (kgo.BlockRebalanceOnPoll): a
// rebalance waits until the round is flushed.
//
// # Write, then commit
//
// Offsets are committed only after what their records produced is
// written: Member.WriteThenCommit retries each write with backoff until
// it succeeds and then commits; a transactional member (Options.
// TransactionalID) commits its outputs and its offsets in one
// transaction instead. A crash therefore replays at most the uncommitted
// tail, and writes must be idempotent, so that the replay changes nothing
// (or, in transactions, is never seen). A processor may write in the
// background while the next round is applied (the joiner does), one batch
// at a time, so batches are written and committed in order. When the
// member stops (its context ends), the last round is flushed with
// Round.Final and its writes still get retry.ShutdownGrace.
//
// # Order
//
// Records are consumed read_committed and, with
// Options.KeepControlRecords, with their transaction markers, whose
// offsets make the positions exact: a processor that merges a
// partition's streams (logmerge.Merge) then applies them in one order
// that depends only on the logs, so a live member, a restarted one and a
// replay into empty tables produce the same rows.
//
// # Rebalances
//
// Each group callback first lets the processor settle its writes in
// flight (Processor.Settle). Then:
//
//   - Revoked: everything applied was flushed before the rebalance was
//     allowed and is settled now, so the processor's state of a revoked
//     partition is exactly the committed one; Processor.Release drops it
//     (or keeps it in case the partition comes back).
//   - Lost (the session expired): the new owner may already be replaying
//     what was applied after the last commit; the processor drops that
//     state (Release, lost).
//   - Assigned: the partitions new to the member are restored
//     (Processor.Restore) by replaying their streams up to the group's
//     committed offsets, read stable, so that a pending transaction's
//     offsets are waited for. Nothing is written: it was written before
//     those offsets were committed. A restore that fails (a broker
//     restarting under the rebalance) is retried with backoff within the
//     rebalance timeout; one that keeps failing makes the member leave
//     the group loudly rather than run without its state, and Run
//     returns why.
//   - Settling: with Options.SettleTime, newly assigned partitions are
//     not restored in the rebalance. Their fetching is paused, and the
//     poll loop restores them (between a poll and its round's end, when
//     the group cannot rebalance) once no rebalance has changed the
//     member's partitions for SettleTime and the broker reports the
//     group stable. Members that start together then restore each
//     partition once, where it stays, instead of the first restoring and
//     applying them all until the others join and the partitions move.
//     A partition revoked while it waits was never restored: nothing is
//     released.
//   - Rejoined: a Flush whose error wraps ErrRejoin (a transaction whose
//     end did not reach the broker: its outcome is unknown and the
//     session cannot go on) makes the member start over in the same
//     process, as a restarted one would: it leaves the group (every
//     partition released), joins again with a new client and session,
//     which fences the old one, and restores what it is assigned.
//
// # Locking
//
// The Member calls the processor under one lock, from the poll loop
// between a poll and the end of its round, and from the group callbacks,
// which franz-go runs only between rounds. A processor needs no lock of
// its own for the state those calls share; work it starts in the
// background (a write in flight) is its own to synchronise.
package stream
