package reader

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// The attention queue, drift pages in evidence_id order and drift detail
// read a few rows by key. They read drift_evidence and node_agent_status
// (granules of 256 rows, migration 006) without FINAL: on ClickHouse
// 18.16 FINAL collapses the selected granules on one thread, more than
// ten times slower than reading them. So these reads
// fetch every row of the keys they want and pick each key's current row
// themselves, as a merge would: the highest version, and among rows of
// one version (the same transition written twice) the latest updated_at.
// Filters are evaluated by ClickHouse on every row, returned as one
// column, and only the current row's answer counts, which is exactly what
// FINAL with the filter in WHERE answers.

// maxKeysPerQuery bounds the keys of one IN list, keeping the query text
// well under max_query_size (256 KiB by default).
const maxKeysPerQuery = 1000

// supersedes reports whether a row of version v written at u replaces one
// of version w written at t.
func supersedes(v uint64, u *time.Time, w uint64, t *time.Time) bool {
	if v != w {
		return v > w
	}
	return stamp(u) > stamp(t)
}

func stamp(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixNano()
}

// matchColumn renders conds as one boolean column, true without conds.
func matchColumn(conds []string) string {
	if len(conds) == 0 {
		return "1"
	}
	return "(" + strings.Join(conds, " AND ") + ")"
}

// keyArgs returns args followed by the keys.
func keyArgs(args []any, keys []string) []any {
	out := make([]any, 0, len(args)+len(keys))
	out = append(out, args...)
	for _, k := range keys {
		out = append(out, k)
	}
	return out
}

// distinctSorted returns the distinct keys in ascending order.
func distinctSorted(keys []string) []string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// currentFindings returns, in evidence_id order, the current rows of the
// findings ids whose current row meets conds.
func (rd *Reader) currentFindings(ctx context.Context, name string, conds []string, args []any, ids []string) ([]apitypes.Finding, error) {
	return currentRows(ctx, rd, name, "SELECT "+findingColumns+", "+matchColumn(conds)+" FROM drift_evidence WHERE ",
		"evidence_id", args, ids, scanFinding, func(f *apitypes.Finding) (string, uint64, *time.Time) {
			return f.EvidenceID, f.Version, f.UpdatedAt
		})
}

// currentNodes returns, in node_id order, the current rows of the nodes
// ids whose current row meets conds.
func (rd *Reader) currentNodes(ctx context.Context, name string, conds []string, args []any, ids []string) ([]apitypes.Node, error) {
	return currentRows(ctx, rd, name, "SELECT "+nodeColumns+", "+matchColumn(conds)+" FROM node_agent_status WHERE ",
		"node_id", args, ids, scanNode, func(n *apitypes.Node) (string, uint64, *time.Time) {
			return n.NodeID, n.Version, n.UpdatedAt
		})
}

// currentRows returns, in key order, the current rows of the keys ids
// whose current row meets the conditions: selectWhere selects the row
// columns then the match column, and is followed by the keyCol IN list;
// args are the conditions' arguments. version names a row's key, version
// and update time.
func currentRows[T any](ctx context.Context, rd *Reader, name, selectWhere, keyCol string, args []any, ids []string,
	scan func(driver.Rows, ...any) (T, error), version func(*T) (string, uint64, *time.Time)) ([]T, error) {
	type current struct {
		row   T
		match bool
	}
	best := make(map[string]current, len(ids))
	ids = distinctSorted(ids)
	for keys := range slices.Chunk(ids, maxKeysPerQuery) {
		err := rd.each(ctx, name, selectWhere+inList(keyCol, len(keys)), keyArgs(args, keys), func(r driver.Rows) error {
			var m uint8
			row, err := scan(r, &m)
			id, v, u := version(&row)
			if c, ok := best[id]; ok {
				_, w, t := version(&c.row)
				if !supersedes(v, u, w, t) {
					return err
				}
			}
			best[id] = current{row, m != 0}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]T, 0, len(best))
	for _, id := range ids {
		if c, ok := best[id]; ok && c.match {
			out = append(out, c.row)
		}
	}
	return out, nil
}

// Drift pages in evidence_id order look for candidates between the cursor
// and the markSpan-th sampled evidence id after it (about 1024 x markSpan
// findings), then over ranges markGrowth times wider while the page is
// short.
const (
	markSpan   = 4
	markGrowth = 8
)

// pageByMarks reads up to limit current findings matching f after the
// evidence id after ("" for the first), in evidence_id order.
//
// Each step reads, without FINAL, the evidence ids of the rows in a range
// that meet the filter: a superset of the findings whose current row
// does, since every current row is a row. ClickHouse checks the filter
// columns first (PREWHERE) and reads evidence ids only of the granules
// where some row passes, so a long run of findings the filter excludes
// (resolved ones, for the default page of open findings) costs a read of
// its status column. The candidates' current rows then decide.
func (rd *Reader) pageByMarks(ctx context.Context, f Filter, after string, limit int) ([]apitypes.Finding, error) {
	conds, args := f.where()
	out := []apitypes.Finding{}
	lo, span := after, markSpan
	for {
		hi, err := rd.markAfter(ctx, lo, span)
		if err != nil {
			return nil, err
		}
		need := limit - len(out)
		ids, full, err := rd.candidates(ctx, conds, args, lo, hi, need)
		if err != nil {
			return nil, err
		}
		if len(ids) > 0 {
			fs, err := rd.currentFindings(ctx, "drift_list", conds, args, ids)
			if err != nil {
				return nil, err
			}
			out = append(out, fs...)
		}
		switch {
		case len(out) >= limit:
			return out[:limit], nil
		case full:
			// The candidate rows stopped at ids' last: every finding
			// up to it is decided, and the range goes on from there.
			lo = ids[len(ids)-1]
		case hi == "":
			return out, nil
		default:
			lo, span = hi, span*markGrowth
		}
	}
}

// candidates returns, in order and distinct, the evidence ids of the first
// n rows in (lo, hi] (hi "" is no bound) that meet conds, whatever their
// version; full reports that there were n such rows, so rows past the
// last id returned may meet conds too.
func (rd *Reader) candidates(ctx context.Context, conds []string, args []any, lo, hi string, n int) (ids []string, full bool, err error) {
	sql := "SELECT evidence_id FROM drift_evidence"
	a := slices.Clone(args)
	if len(conds) > 0 {
		sql += " PREWHERE " + strings.Join(conds, " AND ")
	}
	sql += " WHERE evidence_id > ?"
	a = append(a, lo)
	if hi != "" {
		sql += " AND evidence_id <= ?"
		a = append(a, hi)
	}
	sql += fmt.Sprintf(" ORDER BY evidence_id LIMIT %d", n)
	got := 0
	err = rd.each(ctx, "drift_candidates", sql, a, func(r driver.Rows) error {
		var id string
		got++
		if err := r.Scan(&id); err != nil {
			return err
		}
		if len(ids) == 0 || ids[len(ids)-1] != id {
			ids = append(ids, id)
		}
		return nil
	})
	return ids, got == n, err
}

// markAfter returns the n-th sampled evidence id after lo, "" if there
// are fewer.
func (rd *Reader) markAfter(ctx context.Context, lo string, n int) (string, error) {
	var hi string
	err := rd.each(ctx, "drift_marks", fmt.Sprintf(`SELECT evidence_id FROM drift_evidence_marks
	WHERE evidence_id > ? GROUP BY evidence_id ORDER BY evidence_id LIMIT %d, 1`, n-1), []any{lo}, func(r driver.Rows) error { return r.Scan(&hi) })
	return hi, err
}
