package billing

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/chdb"
	"github.com/driftline/driftline/pipeline/event"
)

// Batch is what one flush writes.
type Batch struct {
	// Mismatches holds the latest row of each mismatch changed in the
	// batch.
	Mismatches []Mismatch
	// Rated holds the rated lines first applied in the batch.
	Rated []event.Rated
	// Windows holds the latest row of each conservation window changed in
	// the batch.
	Windows []Window
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return len(b.Mismatches) == 0 && len(b.Rated) == 0 && len(b.Windows) == 0
}

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset() {
	b.Mismatches, b.Rated, b.Windows = b.Mismatches[:0], b.Rated[:0], b.Windows[:0]
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

var ratedTable = chdb.NewTable("rated_usage",
	chdb.String("usage_id", func(r *event.Rated) string { return r.UsageID }),
	chdb.String("metering_source", func(r *event.Rated) string { return r.MeteringSource }),
	chdb.String("metering_id", func(r *event.Rated) string { return r.MeteringID }),
	chdb.String("unit_id", func(r *event.Rated) string { return r.UnitID }),
	chdb.UInt32("unit_version", func(r *event.Rated) uint32 { return uint32(r.UnitVersion) }),
	chdb.String("quantity", func(r *event.Rated) string { return r.Quantity }),
	chdb.String("unit_price", func(r *event.Rated) string { return r.UnitPrice }),
	chdb.String("amount", func(r *event.Rated) string { return r.Amount }),
	chdb.String("currency", func(r *event.Rated) string { return r.Currency }),
	chdb.String("tenant_id", func(r *event.Rated) string { return r.TenantID }),
	chdb.String("product_id", func(r *event.Rated) string { return r.ProductID }),
	chdb.DateTime("rated_at", func(r *event.Rated) time.Time { return chdb.Epoch(r.RatedAt) }),
	chdb.DateTime("day", func(r *event.Rated) time.Time {
		at := chdb.Epoch(r.RatedAt)
		return time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	}),
)

var windowTable = chdb.NewTable("billing_window",
	chdb.String("tenant_id", func(w *Window) string { return w.Key.TenantID }),
	chdb.String("product_id", func(w *Window) string { return w.Key.ProductID }),
	chdb.String("currency", func(w *Window) string { return w.Key.Currency }),
	chdb.DateTime("window_start", func(w *Window) time.Time { return time.Unix(w.Key.Start, 0).UTC() }),
	chdb.UInt32("partition", func(w *Window) uint32 { return uint32(w.Partition) }),
	chdb.UInt64("accepted", func(w *Window) uint64 { return u64(w.Accepted) }),
	chdb.UInt64("rejected", func(w *Window) uint64 { return u64(w.Rejected) }),
	chdb.UInt64("rating_pending", func(w *Window) uint64 { return u64(w.RatingPending) }),
	chdb.UInt64("not_rated", func(w *Window) uint64 { return u64(w.NotRated) }),
	chdb.UInt64("rated", func(w *Window) uint64 { return u64(w.Rated) }),
	chdb.String("rated_amount", func(w *Window) string { return w.RatedAmount }),
	chdb.UInt64("rated_without_usage", func(w *Window) uint64 { return u64(w.RatedWithoutUsage) }),
	chdb.String("rated_without_usage_amount", func(w *Window) string { return w.RatedWithoutUsageAmount }),
	chdb.UInt64("ledgered", func(w *Window) uint64 { return u64(w.Ledgered) }),
	chdb.String("ledgered_amount", func(w *Window) string { return w.LedgeredAmount }),
	chdb.UInt64("ledger_pending", func(w *Window) uint64 { return u64(w.LedgerPending) }),
	chdb.String("ledger_pending_amount", func(w *Window) string { return w.LedgerPendingAmount }),
	chdb.UInt64("not_ledgered", func(w *Window) uint64 { return u64(w.NotLedgered) }),
	chdb.String("not_ledgered_amount", func(w *Window) string { return w.NotLedgeredAmount }),
	chdb.UInt64("amount_mismatch", func(w *Window) uint64 { return u64(w.AmountMismatch) }),
	chdb.String("amount_mismatch_amount", func(w *Window) string { return w.AmountMismatchAmount }),
	chdb.String("amount_mismatch_ledger_amount", func(w *Window) string { return w.AmountMismatchLedgerAmount }),
	chdb.UInt64("ledger_entries", func(w *Window) uint64 { return u64(w.LedgerEntries) }),
	chdb.String("ledger_amount", func(w *Window) string { return w.LedgerAmount }),
	chdb.UInt64("ledger_without_rated", func(w *Window) uint64 { return u64(w.LedgerWithoutRated) }),
	chdb.String("ledger_without_rated_amount", func(w *Window) string { return w.LedgerWithoutRatedAmount }),
	chdb.UInt64("unexplained", func(w *Window) uint64 { return u64(w.Unexplained) }),
	chdb.Bool("balanced", (*Window).Balanced),
	chdb.DateTime("last_event_at", func(w *Window) time.Time { return chdb.Epoch(w.LastEventAt) }),
	chdb.UInt64("version", func(w *Window) uint64 { return w.Version }),
	chdb.Now[Window]("updated_at"),
)

var mismatchTable = chdb.NewTable("billing_mismatch",
	chdb.String("mismatch_id", func(m *Mismatch) string { return m.MismatchID }),
	chdb.String("kind", func(m *Mismatch) string { return m.Kind }),
	chdb.String("usage_id", func(m *Mismatch) string { return m.UsageID }),
	chdb.String("metering_source", func(m *Mismatch) string { return m.MeteringSource }),
	chdb.String("metering_id", func(m *Mismatch) string { return m.MeteringID }),
	chdb.String("tenant_id", func(m *Mismatch) string { return m.TenantID }),
	chdb.String("product_id", func(m *Mismatch) string { return m.ProductID }),
	chdb.String("unit_id", func(m *Mismatch) string { return m.UnitID }),
	chdb.String("quantity", func(m *Mismatch) string { return m.Quantity }),
	chdb.String("rated_amount", func(m *Mismatch) string { return m.RatedAmount }),
	chdb.String("ledger_amount", func(m *Mismatch) string { return m.LedgerAmount }),
	chdb.String("currency", func(m *Mismatch) string { return m.Currency }),
	chdb.String("status", func(m *Mismatch) string { return m.Status }),
	chdb.DateTime("first_seen_at", func(m *Mismatch) time.Time { return chdb.Epoch(m.FirstSeenAt) }),
	chdb.DateTime("last_seen_at", func(m *Mismatch) time.Time { return chdb.Epoch(m.LastSeenAt) }),
	chdb.UInt64("version", func(m *Mismatch) uint64 { return m.Version }),
	chdb.Now[Mismatch]("updated_at"),
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
	return mismatchTable.Insert(ctx, c.conn, now, b.Mismatches)
}

// u64 converts a count, which the tracker never lets go negative.
func u64(n int64) uint64 {
	if n < 0 {
		panic("BUG: billing: negative window count")
	}
	return uint64(n)
}
