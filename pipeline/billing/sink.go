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
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool { return len(b.Mismatches) == 0 && len(b.Rated) == 0 }

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset() { b.Mismatches, b.Rated = b.Mismatches[:0], b.Rated[:0] }

// ClickHouse writes batches to the billing_mismatch and rated_usage tables
// (schema/clickhouse). Both are ReplacingMergeTree, so writing a batch
// twice (a crash between the write and the offset commit) changes nothing
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

// Write inserts the rated lines, then the mismatch rows.
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
