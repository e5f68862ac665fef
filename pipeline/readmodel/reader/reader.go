package reader

import (
	"context"
	"fmt"
	"math"
	"slices"
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

// each runs one named query and calls scan for each row, counting
// failures per name.
func (rd *Reader) each(ctx context.Context, name, sql string, args []any, scan func(driver.Rows) error) error {
	rows, err := rd.db.Query(ctx, sql, args...)
	if err != nil {
		rd.failed(name)
		return fmt.Errorf("clickhouse query %s: %w", name, err)
	}
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

// eachRow runs one named query and calls fn with the value scan reads
// from each row, as rows arrive.
func eachRow[T any](ctx context.Context, rd *Reader, name, sql string, args []any, scan func(driver.Rows) (T, error), fn func(T) error) error {
	return rd.each(ctx, name, sql, args, func(r driver.Rows) error {
		v, err := scan(r)
		if err != nil {
			return err
		}
		return fn(v)
	})
}

// list runs one named query and appends the value scan reads from each
// row to out: callers pass an empty slice where an answer of no rows must
// encode as [] rather than null.
func list[T any](ctx context.Context, rd *Reader, name, sql string, args []any, out []T, scan func(driver.Rows) (T, error)) ([]T, error) {
	err := rd.each(ctx, name, sql, args, func(r driver.Rows) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	return out, err
}

// listSQL selects columns of the current rows of table matching conds
// after the position after, in order with idCol breaking ties, at most
// limit (0: all).
func listSQL(columns, table, idCol string, conds []string, args []any, order Sort, after *Keyset, limit int) (string, []any) {
	if after != nil {
		c, a := order.after(*after, idCol)
		conds = append(slices.Clone(conds), c)
		args = append(slices.Clone(args), a...)
	}
	sql := "SELECT " + columns + " FROM " + table + " FINAL" + whereClause(conds) + order.orderBy(idCol)
	if limit > 0 {
		sql += fmt.Sprintf(" LIMIT %d", limit)
	}
	return sql, args
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
