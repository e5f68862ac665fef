package readmodel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/readmodel"
)

type insertRow struct {
	id    string
	kind  string
	u8    uint8
	u16   uint16
	u32   uint32
	u64   uint64
	i64   int64
	f64   float64
	at    time.Time
	flag  bool
	empty string
	tags  []string
}

var insertTable = readmodel.NewTable("insert_test",
	readmodel.String("id", func(r *insertRow) string { return r.id }),
	readmodel.String("kind", func(r *insertRow) string { return r.kind }),
	readmodel.UInt8("u8", func(r *insertRow) uint8 { return r.u8 }),
	readmodel.UInt16("u16", func(r *insertRow) uint16 { return r.u16 }),
	readmodel.UInt32("u32", func(r *insertRow) uint32 { return r.u32 }),
	readmodel.UInt64("u64", func(r *insertRow) uint64 { return r.u64 }),
	readmodel.Int64("i64", func(r *insertRow) int64 { return r.i64 }),
	readmodel.Float64("f64", func(r *insertRow) float64 { return r.f64 }),
	readmodel.DateTime("at", func(r *insertRow) time.Time { return readmodel.Epoch(r.at) }),
	readmodel.DateTime("day", func(r *insertRow) time.Time { return readmodel.Epoch(r.at) }),
	readmodel.Bool("flag", func(r *insertRow) bool { return r.flag }),
	readmodel.String("empty", func(r *insertRow) string { return r.empty }),
	readmodel.Strings("tags", func(r *insertRow) []string { return r.tags }),
	readmodel.Now[insertRow]("written_at"),
	readmodel.NowVersion[insertRow]("version"),
)

// TestTableInsert writes rows of every column kind, in parts that cross
// a block boundary (chdb.BlockRows) and an empty part, and reads every
// row back: values land in their columns and rows keep their order,
// LowCardinality and Array(String) columns included (a nil list is an
// empty array).
func TestTableInsert(t *testing.T) {
	cfg := testenv.ClickHouse(t)
	conn := open(t, cfg)
	ctx := context.Background()
	if err := conn.Exec(ctx, `CREATE TABLE insert_test (seq UInt64 DEFAULT rowNumberInAllBlocks(), id String,
 kind LowCardinality(String), u8 UInt8, u16 UInt16, u32 UInt32, u64 UInt64, i64 Int64, f64 Float64, at DateTime,
 day Date, flag UInt8, empty String, tags Array(String), written_at DateTime, version UInt64) ENGINE = Log`); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	total := readmodel.BlockRows + 12
	rows := make([]insertRow, total)
	for i := range rows {
		rows[i] = insertRow{id: fmt.Sprintf("id-%07d", i), kind: fmt.Sprintf("kind-%d", i%5), u8: uint8(i), u16: uint16(i),
			u32: uint32(i), u64: uint64(i) << 20, i64: -int64(i), f64: float64(i) / 4, at: base.Add(time.Duration(i) * time.Second),
			flag: i%3 == 0}
		if k := i % 4; k > 0 { // and none every fourth row
			for j := range k {
				rows[i].tags = append(rows[i].tags, fmt.Sprintf("t%d-%d", j, i%7))
			}
		}
	}
	rows[8].tags = []string{}
	rows[7].at = time.Time{}                                 // a zero time is stored as the epoch
	rows[9].at = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC) // past a DateTime's last second: stored as that second
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	split := readmodel.BlockRows - 5
	if err := insertTable.Insert(ctx, conn, now, rows[:split], nil, rows[split:]); err != nil {
		t.Fatal(err)
	}
	if err := insertTable.Insert(ctx, conn, now); err != nil {
		t.Fatalf("an insert of no rows: %v", err)
	}
	if got := insertTable.Statement(); got != "INSERT INTO insert_test (id, kind, u8, u16, u32, u64, i64, f64, at, day, flag, empty, tags, written_at, version)" {
		t.Errorf("statement: %s", got)
	}

	res, err := conn.Query(ctx, `SELECT id, toString(kind), u8, u16, u32, u64, i64, f64, at, day, flag, empty, tags, written_at, version,
 toTypeName(kind) FROM insert_test ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	i := 0
	for res.Next() {
		var (
			got        insertRow
			day, wrote time.Time
			flag       uint8
			version    uint64
			kindType   string
		)
		if err := res.Scan(&got.id, &got.kind, &got.u8, &got.u16, &got.u32, &got.u64, &got.i64, &got.f64, &got.at, &day,
			&flag, &got.empty, &got.tags, &wrote, &version, &kindType); err != nil {
			t.Fatal(err)
		}
		want := rows[i]
		wantAt := readmodel.Epoch(want.at)
		got.flag = flag == 1
		if got.id != want.id || got.kind != want.kind || got.u8 != want.u8 || got.u16 != want.u16 || got.u32 != want.u32 ||
			got.u64 != want.u64 || got.i64 != want.i64 || got.f64 != want.f64 || !got.at.Equal(wantAt) || got.flag != want.flag ||
			got.empty != "" || !slices.Equal(got.tags, want.tags) {
			t.Fatalf("row %d: got %+v, want %+v", i, got, want)
		}
		if y, m, d := wantAt.Date(); day.Year() != y || day.Month() != m || day.Day() != d {
			t.Fatalf("row %d: day %v, want the date of %v", i, day, wantAt)
		}
		if !wrote.Equal(now) || version != uint64(now.UnixNano()) {
			t.Fatalf("row %d: written_at %v version %d, want %v and %d", i, wrote, version, now, now.UnixNano())
		}
		if kindType != "LowCardinality(String)" {
			t.Fatalf("kind is %s", kindType)
		}
		i++
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if i != total {
		t.Fatalf("read %d rows, want %d", i, total)
	}
}

// TestBlocks splits parts into blocks of at most n rows without losing,
// repeating or reordering a row.
func TestBlocks(t *testing.T) {
	for _, sizes := range [][]int{{}, {0}, {3}, {4}, {5}, {1, 0, 7, 2}, {4, 4}, {9, 1, 1}} {
		var parts [][]int
		next := 0
		for _, n := range sizes {
			p := make([]int, n)
			for i := range p {
				p[i] = next
				next++
			}
			parts = append(parts, p)
		}
		seen := 0
		for block := range readmodel.Blocks(parts, 4) {
			rows := 0
			for _, p := range block {
				for _, v := range p {
					if v != seen {
						t.Fatalf("sizes %v: row %d where %d was due", sizes, v, seen)
					}
					seen++
					rows++
				}
			}
			if rows == 0 || rows > 4 {
				t.Fatalf("sizes %v: a block of %d rows", sizes, rows)
			}
		}
		if seen != next {
			t.Fatalf("sizes %v: %d rows of %d", sizes, seen, next)
		}
	}
}
