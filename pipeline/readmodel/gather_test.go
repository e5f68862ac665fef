package readmodel

import (
	"fmt"
	"testing"
	"time"

	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// driverColumn is the driver's column of a batch without a connection.
type driverColumn struct{ chcolumn.Interface }

func (c driverColumn) Append(v any) error {
	_, err := c.Interface.Append(v)
	return err
}

// BenchmarkGatherStrings is the client's cost of an Array(String) column,
// a block of node rows' tags (three values a row): gathered from the rows
// and appended to the driver's column, which copies them.
//
//	go test -run '^$' -bench GatherStrings ./pipeline/readmodel
func BenchmarkGatherStrings(b *testing.B) {
	type row struct{ tags []string }
	rows := make([]row, BlockRows)
	for i := range rows {
		rows[i].tags = []string{"env:prod", fmt.Sprintf("team:%d", i%9), "region:eu-west-1"}
	}
	c := Strings("tags", func(r *row) []string { return r.tags })
	col, err := chcolumn.Type("Array(String)").Column("tags", nil)
	if err != nil {
		b.Fatal(err)
	}
	var s scratch
	b.ReportAllocs()
	for b.Loop() {
		col.Reset()
		if err := c.gather(driverColumn{col}, [][]row{rows}, &s, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	if col.Rows() != len(rows) {
		b.Fatalf("%d rows in the column, want %d", col.Rows(), len(rows))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
