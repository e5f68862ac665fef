// Package billing runs the billing reconciler: one member of a Kafka
// consumer group over the co-partitioned usage.events, billing.rated and
// billing.ledger topics (CONTRACT sections 1, 3.4-3.7 and 5). For each
// partition it owns it keeps, per usage key and usage_id, what was
// accepted, rated and posted, and raises and resolves billing_mismatch
// rows in event time (Tracker); every rated line is also written to
// rated_usage for finance totals.
//
// The rules are in docs/billing-model.md. In short:
//
//   - usage_not_rated: accepted usage with no rated line once the
//     partition's watermark passes occurred_at + RatingGrace. Usage that
//     is explained (unknown or retired unit, duplicate usage) is never
//     rated by the rater and never raises it.
//   - rated_not_ledgered: a rated line with no ledger entry once the
//     watermark passes the rated line's event time + LedgerGrace.
//   - amount_mismatch: the ledger entry's amount (exact decimal compare)
//     or currency differs from the rated line's.
//   - duplicate_usage: a second usage_id for a usage key already claimed
//     (first one wins, in partition order, exactly as the rater decides).
//   - unknown_unit: the usage's unit is not in the price book, or retired.
//   - window_unbalanced (an extension of the contract's kinds): a
//     conservation window holds a rated line without usage or a ledger
//     entry without rated line after its grace.
//
// Every usage_id is also counted in one conservation window (window.go):
// per tenant, product, currency and UTC hour of the usage, accepted usage
// is rated, pending or rejected, and rated lines are ledgered, pending or
// mismatched, in exact decimals; the rows go to billing_window.
//
// The three streams of a partition are applied in one log-determined order
// (package logmerge, as the drift joiner does), so that a restore and the
// live consumer apply the same records in the same order. Offsets are
// committed only after ClickHouse has the batch, and every row
// is idempotent (ReplacingMergeTree by version), so a crash replays at most
// the uncommitted tail and changes nothing. On assignment a worker restores
// a partition's state by replaying the three topic partitions up to the
// group's committed offsets without writing anything, exactly like the
// drift joiner. Settled usage is dropped from memory once its window is
// past the horizon (prune.go); usage keys are forgotten, as the rater
// forgets them, once the generation of their usage's event time ends
// before the watermark less the horizon, and usage older than that is
// refused as late_event. Restore time grows with the retained history of
// the billing topics.
//
// Memory: records are decoded without copying (contract.Decoder with
// ZeroCopy), and the tracker copies only the strings it keeps (usage_id,
// metering_id, quantity, amounts) into a byte arena, numbering the
// low-cardinality ones (interner) and each state's combination of them
// (descs). Usage states hold no pointer: they live
// in a slab of fixed chunks found through open-addressing tables of slots
// (store.go), so the collector scans none of them. A mismatch keeps its
// state (times, version, open), not its row: the row is described anew
// from the usage state at each transition. Records a merge holds back are
// copied off their fetch buffers after each apply (compactQueues), so the
// buffers go with the records applied.
package reconcile
