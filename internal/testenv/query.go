package testenv

import (
	"context"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Strings runs a query of one String column and returns its values in
// the order ClickHouse sends them, failing t on any error.
func Strings(t testing.TB, conn driver.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// Insert writes rows with one INSERT of sql, whose columns it names, so
// that they land in one part of their own; it fails t on any error.
func Insert(t testing.TB, conn driver.Conn, sql string, rows ...[]any) {
	t.Helper()
	b, err := conn.PrepareBatch(context.Background(), sql)
	if err != nil {
		t.Fatalf("prepare %s: %v", sql, err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			t.Fatalf("append to %s: %v", sql, err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatalf("insert %s: %v", sql, err)
	}
}
