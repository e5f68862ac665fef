package reader

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DB is what the reader needs of ClickHouse; a clickhouse-go driver.Conn
// is one.
type DB interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
	Ping(ctx context.Context) error
}

// Options configures a Reader.
type Options struct {
	// Failed is called with the name of every query that fails (drift_list,
	// heatmap, billing_totals, ...), for a per-query error count. Default:
	// nothing is called.
	Failed func(query string)
}

// Reader runs the read model's queries. It is safe for concurrent use.
type Reader struct {
	db     DB
	failed func(query string)
}

// New returns a Reader over db.
func New(db DB, opts Options) *Reader {
	if opts.Failed == nil {
		opts.Failed = func(string) {}
	}
	return &Reader{db: db, failed: opts.Failed}
}

// Ping reports whether ClickHouse answers.
func (rd *Reader) Ping(ctx context.Context) error { return rd.db.Ping(ctx) }

// query runs one named query, counting failures per name.
func (rd *Reader) query(ctx context.Context, name, sql string, args ...any) (driver.Rows, error) {
	rows, err := rd.db.Query(ctx, sql, args...)
	if err != nil {
		rd.failed(name)
		return nil, fmt.Errorf("clickhouse query %s: %w", name, err)
	}
	return rows, nil
}

// scanAll calls scan for each row and closes rows.
func (rd *Reader) scanAll(name string, rows driver.Rows, scan func(driver.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			rd.failed(name)
			return fmt.Errorf("clickhouse query %s: scan: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		rd.failed(name)
		return fmt.Errorf("clickhouse query %s: %w", name, err)
	}
	return nil
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

func inList(col string, n int) string {
	if n == 1 {
		return col + " = ?"
	}
	return col + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// nullTime maps ClickHouse's zero DateTime (the Unix epoch: "never") to
// nil and anything else to UTC.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() || t.Unix() <= 0 {
		return nil
	}
	u := t.UTC()
	return &u
}

// finite maps NaN and infinities, which JSON cannot carry, to 0.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
