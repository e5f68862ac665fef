package reconcile

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// Batch is what one flush writes.
type Batch struct {
	// Mismatches holds the latest row of each mismatch changed in the
	// batch, in chunks of MismatchChunk rows (the last one fewer).
	Mismatches [][]Mismatch
	// Rated holds the rated lines first applied in the batch.
	Rated []contract.Rated
	// Windows holds the latest row of each conservation window changed in
	// the batch.
	Windows []Window
	// Producers holds the per-producer rejection counts changed in the
	// batch (cumulative, per partition).
	Producers []readmodel.ProducerRejection
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return len(b.Mismatches) == 0 && len(b.Rated) == 0 && len(b.Windows) == 0 && len(b.Producers) == 0
}

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset() {
	b.Mismatches, b.Rated, b.Windows, b.Producers = b.Mismatches[:0], b.Rated[:0], b.Windows[:0], b.Producers[:0]
}

// ClickHouse writes batches to the billing_mismatch, rated_usage and
// billing_window tables (schema/clickhouse). All are ReplacingMergeTree,
// so writing a batch twice (a crash between the write and the offset commit) changes nothing
// read with FINAL.
type ClickHouse struct {
	conn driver.Conn
	now  func() time.Time
}

// NewClickHouse returns a sink writing through conn.
func NewClickHouse(conn driver.Conn) *ClickHouse { return &ClickHouse{conn: conn, now: time.Now} }

var ratedTable = readmodel.NewTable("rated_usage",
	readmodel.String("usage_id", func(r *contract.Rated) string { return r.UsageID }),
	readmodel.String("metering_source", func(r *contract.Rated) string { return r.MeteringSource }),
	readmodel.String("metering_id", func(r *contract.Rated) string { return r.MeteringID }),
	readmodel.String("unit_id", func(r *contract.Rated) string { return r.UnitID }),
	readmodel.UInt32("unit_version", func(r *contract.Rated) uint32 { return uint32(r.UnitVersion) }),
	readmodel.String("quantity", func(r *contract.Rated) string { return r.Quantity }),
	readmodel.String("unit_price", func(r *contract.Rated) string { return r.UnitPrice }),
	readmodel.String("amount", func(r *contract.Rated) string { return r.Amount }),
	readmodel.String("currency", func(r *contract.Rated) string { return r.Currency }),
	readmodel.String("tenant_id", func(r *contract.Rated) string { return r.TenantID }),
	readmodel.String("product_id", func(r *contract.Rated) string { return r.ProductID }),
	readmodel.DateTime("rated_at", func(r *contract.Rated) time.Time { return readmodel.Epoch(r.RatedAt) }),
	readmodel.DateTime("day", func(r *contract.Rated) time.Time {
		at := readmodel.Epoch(r.RatedAt)
		return time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	}),
)

var windowTable = readmodel.NewTable("billing_window",
	readmodel.String("tenant_id", func(w *Window) string { return w.Key.TenantID }),
	readmodel.String("product_id", func(w *Window) string { return w.Key.ProductID }),
	readmodel.String("currency", func(w *Window) string { return w.Key.Currency }),
	readmodel.DateTime("window_start", func(w *Window) time.Time { return time.Unix(w.Key.Start, 0).UTC() }),
	readmodel.UInt32("partition", func(w *Window) uint32 { return uint32(w.Partition) }),
	readmodel.UInt64("accepted", func(w *Window) uint64 { return u64(w.Accepted) }),
	readmodel.UInt64("rejected", func(w *Window) uint64 { return u64(w.Rejected) }),
	readmodel.UInt64("rating_pending", func(w *Window) uint64 { return u64(w.RatingPending) }),
	readmodel.UInt64("not_rated", func(w *Window) uint64 { return u64(w.NotRated) }),
	readmodel.UInt64("rated", func(w *Window) uint64 { return u64(w.Rated) }),
	readmodel.String("rated_amount", func(w *Window) string { return w.RatedAmount }),
	readmodel.UInt64("rated_without_usage", func(w *Window) uint64 { return u64(w.RatedWithoutUsage) }),
	readmodel.String("rated_without_usage_amount", func(w *Window) string { return w.RatedWithoutUsageAmount }),
	readmodel.UInt64("ledgered", func(w *Window) uint64 { return u64(w.Ledgered) }),
	readmodel.String("ledgered_amount", func(w *Window) string { return w.LedgeredAmount }),
	readmodel.UInt64("ledger_pending", func(w *Window) uint64 { return u64(w.LedgerPending) }),
	readmodel.String("ledger_pending_amount", func(w *Window) string { return w.LedgerPendingAmount }),
	readmodel.UInt64("not_ledgered", func(w *Window) uint64 { return u64(w.NotLedgered) }),
	readmodel.String("not_ledgered_amount", func(w *Window) string { return w.NotLedgeredAmount }),
	readmodel.UInt64("amount_mismatch", func(w *Window) uint64 { return u64(w.AmountMismatch) }),
	readmodel.String("amount_mismatch_amount", func(w *Window) string { return w.AmountMismatchAmount }),
	readmodel.String("amount_mismatch_ledger_amount", func(w *Window) string { return w.AmountMismatchLedgerAmount }),
	readmodel.UInt64("ledger_entries", func(w *Window) uint64 { return u64(w.LedgerEntries) }),
	readmodel.String("ledger_amount", func(w *Window) string { return w.LedgerAmount }),
	readmodel.UInt64("ledger_without_rated", func(w *Window) uint64 { return u64(w.LedgerWithoutRated) }),
	readmodel.String("ledger_without_rated_amount", func(w *Window) string { return w.LedgerWithoutRatedAmount }),
	readmodel.UInt64("unexplained", func(w *Window) uint64 { return u64(w.Unexplained) }),
	readmodel.Bool("balanced", (*Window).Balanced),
	readmodel.DateTime("last_event_at", func(w *Window) time.Time { return readmodel.Epoch(w.LastEventAt) }),
	readmodel.UInt64("version", func(w *Window) uint64 { return w.Version }),
	readmodel.Now[Window]("updated_at"),
)

var mismatchTable = readmodel.NewTable("billing_mismatch",
	readmodel.String("mismatch_id", func(m *Mismatch) string { return m.MismatchID }),
	readmodel.String("kind", func(m *Mismatch) string { return string(m.Kind) }),
	readmodel.String("usage_id", func(m *Mismatch) string { return m.UsageID }),
	readmodel.String("metering_source", func(m *Mismatch) string { return m.MeteringSource }),
	readmodel.String("metering_id", func(m *Mismatch) string { return m.MeteringID }),
	readmodel.String("tenant_id", func(m *Mismatch) string { return m.TenantID }),
	readmodel.String("product_id", func(m *Mismatch) string { return m.ProductID }),
	readmodel.String("unit_id", func(m *Mismatch) string { return m.UnitID }),
	readmodel.String("quantity", func(m *Mismatch) string { return m.Quantity }),
	readmodel.String("conflict_quantity", func(m *Mismatch) string { return m.ConflictQuantity }),
	readmodel.String("rated_amount", func(m *Mismatch) string { return m.RatedAmount }),
	readmodel.String("ledger_amount", func(m *Mismatch) string { return m.LedgerAmount }),
	readmodel.String("currency", func(m *Mismatch) string { return m.Currency }),
	readmodel.String("status", func(m *Mismatch) string { return string(m.Status) }),
	readmodel.DateTime("first_seen_at", func(m *Mismatch) time.Time { return readmodel.Epoch(m.FirstSeenAt) }),
	readmodel.DateTime("last_seen_at", func(m *Mismatch) time.Time { return readmodel.Epoch(m.LastSeenAt) }),
	readmodel.UInt64("version", func(m *Mismatch) uint64 { return m.Version }),
	readmodel.Now[Mismatch]("updated_at"),
)

// Write inserts the rated lines, then the conservation windows, then the
// mismatch rows (a window_unbalanced row is never visible before the
// window row that explains it).
func (c *ClickHouse) Write(ctx context.Context, b *Batch) error {
	now := c.now()
	if err := ratedTable.Insert(ctx, c.conn, now, b.Rated); err != nil {
		return err
	}
	if err := windowTable.Insert(ctx, c.conn, now, b.Windows); err != nil {
		return err
	}
	if err := readmodel.ProducerRejections.Insert(ctx, c.conn, now, b.Producers); err != nil {
		return err
	}
	return mismatchTable.Insert(ctx, c.conn, now, b.Mismatches...)
}

// u64 converts a count, which the tracker never lets go negative.
func u64(n int64) uint64 {
	if n < 0 {
		panic("BUG: billing: negative window count")
	}
	return uint64(n)
}
