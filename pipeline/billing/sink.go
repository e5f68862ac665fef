package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

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

const insertMismatch = `INSERT INTO billing_mismatch (mismatch_id, kind, usage_id, metering_source, metering_id,
 tenant_id, product_id, unit_id, quantity, rated_amount, ledger_amount, currency, status, first_seen_at,
 last_seen_at, version, updated_at)`

const insertRated = `INSERT INTO rated_usage (usage_id, metering_source, metering_id, unit_id, unit_version,
 quantity, unit_price, amount, currency, tenant_id, product_id, rated_at, day)`

const insertWindow = `INSERT INTO billing_window (tenant_id, product_id, currency, window_start, partition, accepted, rejected,
 rating_pending, not_rated, rated, rated_amount, rated_without_usage, rated_without_usage_amount, ledgered,
 ledgered_amount, ledger_pending, ledger_pending_amount, not_ledgered, not_ledgered_amount, amount_mismatch,
 amount_mismatch_amount, amount_mismatch_ledger_amount, ledger_entries, ledger_amount, ledger_without_rated,
 ledger_without_rated_amount, unexplained, balanced, last_event_at, version, updated_at)`

// Write inserts the rated lines, then the conservation windows, then the
// mismatch rows (a window_unbalanced row is never visible before the
// window row that explains it).
func (c *ClickHouse) Write(ctx context.Context, b *Batch) error {
	if len(b.Rated) > 0 {
		batch, err := c.conn.PrepareBatch(ctx, insertRated)
		if err != nil {
			return fmt.Errorf("prepare rated_usage insert: %w", err)
		}
		for i := range b.Rated {
			r := &b.Rated[i]
			at := dt(r.RatedAt)
			day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
			if err := batch.Append(r.UsageID, r.MeteringSource, r.MeteringID, r.UnitID, uint32(r.UnitVersion),
				r.Quantity, r.UnitPrice, r.Amount, r.Currency, r.TenantID, r.ProductID, at, day); err != nil {
				return fmt.Errorf("append rated_usage row: %w", err)
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert rated_usage: %w", err)
		}
	}
	if len(b.Windows) > 0 {
		now := c.now().UTC()
		batch, err := c.conn.PrepareBatch(ctx, insertWindow)
		if err != nil {
			return fmt.Errorf("prepare billing_window insert: %w", err)
		}
		for i := range b.Windows {
			w := &b.Windows[i]
			balanced := uint8(0)
			if w.Balanced() {
				balanced = 1
			}
			if err := batch.Append(w.Key.TenantID, w.Key.ProductID, w.Key.Currency, time.Unix(w.Key.Start, 0).UTC(), uint32(w.Partition),
				u64(w.Accepted), u64(w.Rejected), u64(w.RatingPending), u64(w.NotRated),
				u64(w.Rated), w.RatedAmount, u64(w.RatedWithoutUsage), w.RatedWithoutUsageAmount,
				u64(w.Ledgered), w.LedgeredAmount, u64(w.LedgerPending), w.LedgerPendingAmount,
				u64(w.NotLedgered), w.NotLedgeredAmount, u64(w.AmountMismatch), w.AmountMismatchAmount,
				w.AmountMismatchLedgerAmount, u64(w.LedgerEntries), w.LedgerAmount, u64(w.LedgerWithoutRated),
				w.LedgerWithoutRatedAmount, u64(w.Unexplained), balanced, dt(w.LastEventAt), w.Version, now); err != nil {
				return fmt.Errorf("append billing_window row: %w", err)
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert billing_window: %w", err)
		}
	}
	if len(b.Mismatches) > 0 {
		now := c.now().UTC()
		batch, err := c.conn.PrepareBatch(ctx, insertMismatch)
		if err != nil {
			return fmt.Errorf("prepare billing_mismatch insert: %w", err)
		}
		for i := range b.Mismatches {
			m := &b.Mismatches[i]
			if err := batch.Append(m.MismatchID, m.Kind, m.UsageID, m.MeteringSource, m.MeteringID, m.TenantID,
				m.ProductID, m.UnitID, m.Quantity, m.RatedAmount, m.LedgerAmount, m.Currency, m.Status,
				dt(m.FirstSeenAt), dt(m.LastSeenAt), m.Version, now); err != nil {
				return fmt.Errorf("append billing_mismatch row: %w", err)
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert billing_mismatch: %w", err)
		}
	}
	return nil
}

// epoch is what a zero time is stored as (DateTime cannot hold year 1).
var epoch = time.Unix(0, 0).UTC()

func dt(t time.Time) time.Time {
	if t.IsZero() || t.Before(epoch) {
		return epoch
	}
	return t.UTC()
}

// u64 converts a count, which the tracker never lets go negative.
func u64(n int64) uint64 {
	if n < 0 {
		panic("BUG: billing: negative window count")
	}
	return uint64(n)
}
