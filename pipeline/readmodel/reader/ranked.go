package reader

import (
	"context"
	"fmt"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// A ranked read is a page of current rows in a sort order read without
// FINAL (see current.go for why): the node pages in every order, the
// drift pages in an order other than evidence_id (which pageByMarks
// reads), the attention queue where its summaries cannot answer, and the
// findings of an evidence bundle.
//
// Let R be the rows, whatever their version, that meet the page's
// conditions (its filter and the cursor's position), and K the position
// of R's k-th row in the page's order. Every current row that meets the
// conditions and ranks at or before K is a row of R at or before K, so
// its key is among the keys of R's first k rows. Those keys' current
// rows that still meet the conditions and rank at or before K are
// therefore exactly the current rows at or before K. If they are as many
// as the page wants (or R has fewer than k rows, so every key was taken),
// they begin the page; if not, superseded rows crowded R's first k, and k
// grows.
//
// For an order by a column, R's first k rows are read in two steps: the
// k-th value of the column alone (a read of one column), then the keys of
// the rows at or before it (the key column read only where the value
// passes). An order by the key takes the first k keys at once.

// rankedTable is what a ranked read needs of drift_evidence or
// node_agent_status.
type rankedTable[T any] struct {
	table, idCol string
	// current reads the current rows of ids that meet conds, in key order.
	current func(rd *Reader, ctx context.Context, name string, conds []string, args []any, ids []string) ([]T, error)
	// key is the position of a row in order s.
	key func(s Sort, row *T) Keyset
}

var (
	findingTable = rankedTable[apitypes.Finding]{
		table: "drift_evidence", idCol: "evidence_id",
		current: (*Reader).currentFindings,
		key:     func(s Sort, f *apitypes.Finding) Keyset { return s.FindingKey(*f) },
	}
	nodeTable = rankedTable[apitypes.Node]{
		table: "node_agent_status", idCol: "node_id",
		current: (*Reader).currentNodes,
		key:     func(s Sort, n *apitypes.Node) Keyset { return s.NodeKey(*n) },
	}
)

// rankedPage reads up to limit (> 0) current rows of t that meet conds,
// after the position after (nil: from the first), in order s.
func rankedPage[T any](ctx context.Context, rd *Reader, name string, t rankedTable[T], s Sort, conds []string, args []any, after *Keyset, limit int) ([]T, error) {
	conds, args = slices.Clip(conds), slices.Clip(args)
	if after != nil {
		c, a := s.after(*after, t.idCol)
		conds, args = append(conds, c), append(args, a...)
	}
	for k := max(2*limit, 64); ; k *= 4 {
		ids, last, all, err := rankedKeys(ctx, rd, name, t.table, t.idCol, s, conds, args, k)
		if err != nil {
			return nil, err
		}
		cc, ca := conds, args
		if !all {
			c, a := s.upTo(last, t.idCol)
			cc, ca = append(cc, c), append(ca, a...)
		}
		rows, err := t.current(rd, ctx, name, cc, ca, ids)
		if err != nil {
			return nil, err
		}
		if all || len(rows) >= limit {
			slices.SortFunc(rows, func(a, b T) int { return s.compare(t.key(s, &a), t.key(s, &b)) })
			return rows[:min(limit, len(rows))], nil
		}
	}
}

// eachChunk is the page size of a ranked export, and eachRankedMax the
// most rows (of any version) meeting an export's filter that it reads as
// ranked pages, for a table of tableRows rows. A ranked export costs about
// 64 times more per row it exports than FINAL costs per row of the table
// (bench/query, export_small and export_medium: 12,000 rows in 0.6 s
// against 9.6 s with FINAL, 111,000 in 7.6 s against 10.2 s, over 10M
// rows), so it is used up to a 64th of the table.
var (
	eachChunk     = 10_000
	eachRankedMax = func(tableRows uint64) uint64 { return max(uint64(eachChunk), tableRows/64) }
)

// eachRanked calls fn with each current row of t that meets conds after
// the position after in order s, at most limit (0: all), reading them as
// ranked pages.
func eachRanked[T any](ctx context.Context, rd *Reader, name string, t rankedTable[T], s Sort, conds []string, args []any, after *Keyset, limit int, fn func(T) error) error {
	for sent := 0; limit == 0 || sent < limit; {
		n := eachChunk
		if limit > 0 {
			n = min(n, limit-sent)
		}
		page, err := rankedPage(ctx, rd, name, t, s, conds, args, after, n)
		if err != nil {
			return err
		}
		for i := range page {
			if err := fn(page[i]); err != nil {
				return err
			}
		}
		if len(page) < n {
			return nil
		}
		sent += len(page)
		k := t.key(s, &page[len(page)-1])
		after = &k
	}
	return nil
}

// count returns the number of rows of table, whatever their version, that
// meet conds, and of all its rows, in one read.
func (rd *Reader) count(ctx context.Context, name, table string, conds []string, args []any) (matching, all uint64, err error) {
	err = rd.each(ctx, name, "SELECT countIf("+matchColumn(conds)+"), count() FROM "+table, args,
		func(r driver.Rows) error { return r.Scan(&matching, &all) })
	return matching, all, err
}

// rankedKeys returns the keys of the first k rows of table (any version)
// that meet conds in order s, and the position of the k-th; all reports
// that fewer than k rows meet conds, so that every key was returned.
func rankedKeys(ctx context.Context, rd *Reader, name, table, idCol string, s Sort, conds []string, args []any, k int) (ids []string, last Keyset, all bool, err error) {
	where := whereClause(conds)
	sql, a := "SELECT "+idCol+", "+s.keySelect()+" FROM "+table, args
	if !s.ByKey() {
		var (
			t     float64
			found bool
		)
		err = rd.each(ctx, name+"_threshold", fmt.Sprintf("SELECT %s FROM %s%s ORDER BY %s LIMIT %d, 1",
			s.keySelect(), table, where, s.keyOrder(), k-1), args, func(r driver.Rows) error {
			found = true
			return r.Scan(&t)
		})
		if err != nil {
			return nil, last, false, err
		}
		if found {
			// Only the rows at or before the k-th value are read further.
			sql += " PREWHERE " + s.keyCol() + s.atOrBefore() + s.bind
			a = append([]any{s.keyArg(t)}, args...)
		}
	}
	sql += where + s.orderBy(idCol) + fmt.Sprintf(" LIMIT %d", k)
	got := 0
	err = rd.each(ctx, name+"_keys", sql, a, func(r driver.Rows) error {
		got++
		if err := r.Scan(&last.ID, &last.Key); err != nil {
			return err
		}
		ids = append(ids, last.ID)
		return nil
	})
	last.Sort = s.Name
	return ids, last, got < k, err
}
