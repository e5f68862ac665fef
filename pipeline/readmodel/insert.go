package readmodel

import (
	"context"
	"fmt"
	"iter"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Table is a batch INSERT of rows of type R into one table, written a
// column at a time: each column's values are gathered from the rows into
// a typed slice and handed to the driver in one call, where a row-at-a-
// time Append boxes every value in an interface and converts it by
// reflection (but for Array(String) columns, which the driver takes
// faster a row at a time: Strings). The column list of the statement is the columns' names, so
// the two cannot drift apart.
//
// LowCardinality columns are sent as plain strings and encoded by the
// server, which then asks for them so: current releases take the setting
// low_cardinality_allow_in_native_format=0 from the query, which Insert
// sends, and 18.16 only from the user's profile (chserver's profile sets
// it). Where neither holds, the server asks for the dictionary encoding
// and clickhouse-go builds it, in a map keyed by interface values: a
// lookup and an allocation per value, correct but slower.
type Table[R any] struct {
	name   string
	insert string
	cols   []Column[R]
}

// Column is one column of a Table: its name and how to gather its values
// from the rows. The constructors (String, UInt64, DateTime, ...) take the
// Go type the column's ClickHouse type is appended from.
type Column[R any] struct {
	name   string
	gather func(bc driver.BatchColumn, parts [][]R, s *scratch, now time.Time) error
}

// NewTable returns the insert of cols into the table name.
func NewTable[R any](name string, cols ...Column[R]) *Table[R] {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return &Table[R]{name: name, cols: cols,
		insert: "INSERT INTO " + name + " (" + strings.Join(names, ", ") + ")"}
}

// Statement returns the INSERT statement, with its column list.
func (t *Table[R]) Statement() string { return t.insert }

// nativeStrings sends LowCardinality columns as plain strings (see Table).
var nativeStrings = clickhouse.WithSettings(clickhouse.Settings{"low_cardinality_allow_in_native_format": 0})

// Insert writes the rows of parts, in order, as one insert; now is the
// time of the write, which the columns Now and NowVersion hold. It writes
// nothing when parts hold no rows.
func (t *Table[R]) Insert(ctx context.Context, conn driver.Conn, now time.Time, parts ...[]R) error {
	return t.InsertBlocks(ctx, conn, now, blocks(parts, BlockRows))
}

// InsertBlocks writes the rows of the blocks in order as one insert, a
// block at a time: each block is sent before the next is asked for, so
// that its rows may be a buffer the next one reuses (rows kept packed
// and unpacked a block at a time). A block should hold at most BlockRows
// rows. It writes nothing when the blocks hold no rows.
func (t *Table[R]) InsertBlocks(ctx context.Context, conn driver.Conn, now time.Time, blocks iter.Seq[[][]R]) error {
	var batch driver.Batch
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	for block := range blocks {
		if batch == nil {
			var err error
			if batch, err = conn.PrepareBatch(clickhouse.Context(ctx, nativeStrings), t.insert); err != nil {
				return fmt.Errorf("prepare %s insert: %w", t.name, err)
			}
		}
		for i, c := range t.cols {
			if err := c.gather(batch.Column(i), block, s, now); err != nil {
				_ = batch.Abort()
				return fmt.Errorf("append %s.%s: %w", t.name, c.name, err)
			}
		}
		if err := batch.Flush(); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("insert %s: %w", t.name, err)
		}
	}
	if batch == nil {
		return nil
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %s: %w", t.name, err)
	}
	return nil
}

// BlockRows is the number of rows Insert sends in one block. The driver
// reuses its column buffers from one block to the next, so a large insert
// neither grows them by doubling nor holds them all at once; each insert
// starts them empty, and they grow to a block's size, so smaller blocks
// leave less garbage and hold less while an insert runs (the joiner
// writes two at once). The server squashes the small blocks of an insert
// into blocks of min_insert_block_size_rows (1,048,576 by default) before
// it writes parts, so the parts are as large as before. Measured on a
// joiner catching up over 10M events (bench/joiner/README.md): 4,096
// rows against 16,384 lowered its peak RSS by about 100 MiB and its CPU
// a little, with ClickHouse's CPU within the spread of the runs; 2,048
// measured the same as 4,096. Blocks of 1,024 rows cut the client's
// growing of its columns further (BenchmarkWrite 45% less client CPU per
// row) but cost ClickHouse about 1 CPU s more over a 10M-event catch-up.
const BlockRows = 1 << 12

// blocks yields parts in blocks of at most n rows, each as the parts'
// slices it covers, in order.
func blocks[R any](parts [][]R, n int) iter.Seq[[][]R] {
	return func(yield func([][]R) bool) {
		var block [][]R
		rows := 0
		for _, p := range parts {
			for len(p) > 0 {
				k := min(len(p), n-rows)
				block, rows, p = append(block, p[:k]), rows+k, p[k:]
				if rows == n {
					if !yield(block) {
						return
					}
					block, rows = block[:0], 0
				}
			}
		}
		if rows > 0 {
			yield(block)
		}
	}
}

// scratch holds the typed slices columns are gathered into, reused from
// one column and one insert to the next.
type scratch struct {
	strs  []string
	u8    []uint8
	u16   []uint16
	u32   []uint32
	u64   []uint64
	i64   []int64
	f64   []float64
	times []time.Time
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// column gathers get of every row into the scratch slice slot picks and
// appends it to the driver's column, which copies the values.
func column[R, V any](name string, get func(*R) V, slot func(*scratch) *[]V) Column[R] {
	return Column[R]{name: name, gather: func(bc driver.BatchColumn, parts [][]R, s *scratch, _ time.Time) error {
		vals := (*slot(s))[:0]
		for _, p := range parts {
			for i := range p {
				vals = append(vals, get(&p[i]))
			}
		}
		// The scratch keeps the last insert's strings alive until the
		// next insert overwrites them or the pool drops it; clearing
		// them costs a write barrier per value while a collection runs.
		*slot(s) = vals
		return bc.Append(vals)
	}}
}

// String is a String or LowCardinality(String) column.
func String[R any](name string, get func(*R) string) Column[R] {
	return column(name, get, func(s *scratch) *[]string { return &s.strs })
}

// UInt8 is a UInt8 column.
func UInt8[R any](name string, get func(*R) uint8) Column[R] {
	return column(name, get, func(s *scratch) *[]uint8 { return &s.u8 })
}

// UInt16 is a UInt16 column.
func UInt16[R any](name string, get func(*R) uint16) Column[R] {
	return column(name, get, func(s *scratch) *[]uint16 { return &s.u16 })
}

// UInt32 is a UInt32 column.
func UInt32[R any](name string, get func(*R) uint32) Column[R] {
	return column(name, get, func(s *scratch) *[]uint32 { return &s.u32 })
}

// UInt64 is a UInt64 column.
func UInt64[R any](name string, get func(*R) uint64) Column[R] {
	return column(name, get, func(s *scratch) *[]uint64 { return &s.u64 })
}

// Int64 is an Int64 column.
func Int64[R any](name string, get func(*R) int64) Column[R] {
	return column(name, get, func(s *scratch) *[]int64 { return &s.i64 })
}

// Float64 is a Float64 column.
func Float64[R any](name string, get func(*R) float64) Column[R] {
	return column(name, get, func(s *scratch) *[]float64 { return &s.f64 })
}

// Strings is an Array(String) column; a nil list is an empty array.
func Strings[R any](name string, get func(*R) []string) Column[R] {
	// A row at a time: the driver appends a []string row without
	// reflection, but a whole [][]string column by reflection over every
	// value (0.36 s of a joiner's 20 CPU s at 10M events, for the node
	// rows' three lists; a row at a time is about 30% less).
	return Column[R]{name: name, gather: func(bc driver.BatchColumn, parts [][]R, _ *scratch, _ time.Time) error {
		for _, p := range parts {
			for i := range p {
				l := get(&p[i])
				if l == nil {
					l = []string{}
				}
				if err := bc.AppendRow(l); err != nil {
					return err
				}
			}
		}
		return nil
	}}
}

// DateTime is a DateTime or Date column. A DateTime holds whole seconds
// from 1970 on; get must return times in that range (see Epoch).
func DateTime[R any](name string, get func(*R) time.Time) Column[R] {
	return column(name, get, func(s *scratch) *[]time.Time { return &s.times })
}

// Bool is a UInt8 column holding 1 for true.
func Bool[R any](name string, get func(*R) bool) Column[R] {
	return UInt8(name, func(r *R) uint8 {
		if get(r) {
			return 1
		}
		return 0
	})
}

// Now is a DateTime column holding the time of the write in every row.
func Now[R any](name string) Column[R] {
	return constant[R](name, func(now time.Time) time.Time { return now.UTC() }, func(s *scratch) *[]time.Time { return &s.times })
}

// NowVersion is a UInt64 column holding the time of the write in
// nanoseconds since 1970 in every row: a version that grows from one
// write to the next.
func NowVersion[R any](name string) Column[R] {
	return constant[R](name, func(now time.Time) uint64 { return uint64(now.UnixNano()) }, func(s *scratch) *[]uint64 { return &s.u64 })
}

// PositionVersion is the version of a row that describes a consumer's
// position in its log (a partition's progress, a cumulative count): pos
// grows with every record applied, so a row written again for an older
// position, by a member that lost the partition while its write was in
// flight, or by a clock behind another member's, never replaces a newer
// one, as a NowVersion could. It is above every NowVersion written before
// 2116 (the rows of these tables written before positions versioned them).
func PositionVersion(pos uint64) uint64 { return 1<<62 | pos&(1<<62-1) }

// constant appends of(now) for every row.
func constant[R, V any](name string, of func(time.Time) V, slot func(*scratch) *[]V) Column[R] {
	return Column[R]{name: name, gather: func(bc driver.BatchColumn, parts [][]R, s *scratch, now time.Time) error {
		v, vals := of(now), (*slot(s))[:0]
		for _, p := range parts {
			for range p {
				vals = append(vals, v)
			}
		}
		*slot(s) = vals
		return bc.Append(vals)
	}}
}

// epoch is what a zero time is stored as (DateTime cannot hold year 1).
var epoch = time.Unix(0, 0).UTC()

// lastDateTime is the last second a DateTime holds (a uint32 of seconds).
var lastDateTime = time.Unix(math.MaxUint32, 0).UTC()

// Epoch returns t in UTC, or the Unix epoch for a zero time or any time
// before it, and the last second a DateTime holds (2106-02-07T06:28:15Z)
// for any time after it: ClickHouse stores a second outside as the epoch,
// which made a time after 2106 read as 1970.
func Epoch(t time.Time) time.Time {
	switch {
	case t.IsZero() || t.Before(epoch):
		return epoch
	case t.After(lastDateTime):
		return lastDateTime
	}
	return t.UTC()
}
