// Package retention bounds the read model's tables that grow with time by
// dropping whole monthly partitions on a schedule: ClickHouse 18.16 has no
// TTL, and dropping a partition costs nothing like a delete. A partition
// goes once the whole month it holds is older than the table's retention,
// and never while it holds the current row of something still open:
//
//   - drift_history (by month of at): kept while it holds the newest
//     history row of an open finding;
//   - rated_usage (by month of day): kept while it holds the rated line
//     of a usage named by an open billing mismatch;
//   - billing_window (by month of window_start): kept while it holds a
//     window that is not balanced (an open window_unbalanced finding);
//   - node_lifecycle_history (by month of at): kept while it holds a
//     node's newest transition (the one that put it where it is);
//   - sync_debt_minute (by month of minute): a timeline, nothing pinned.
//
// consumer_progress holds one row per (consumer, partition) once merged;
// retention deletes the keys that stopped reporting (a renamed group, a
// partition count that shrank), never the newest row of a key that still
// reports within the retention.
//
// drift_evidence, node_agent_status and billing_mismatch are never
// touched: evidence, resolved findings included, outlives its resource.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/contract"
)

// Day is 24 hours, the unit retention is set in.
const Day = 24 * time.Hour

// Policy says how long each table keeps its rows. Zero or less keeps
// them forever.
type Policy struct {
	// History is drift_history's retention.
	History time.Duration
	// Rated is rated_usage's retention: the finance record.
	Rated time.Duration
	// Windows is billing_window's retention.
	Windows time.Duration
	// Progress is how long a consumer_progress key may stop reporting
	// before it is deleted.
	Progress time.Duration
	// Lifecycle is node_lifecycle_history's retention.
	Lifecycle time.Duration
	// SyncDebt is sync_debt_minute's retention.
	SyncDebt time.Duration
}

// DefaultPolicy returns the retention of an environment profile: prod
// keeps evidence longest (history 13 months, rated usage and
// conservation windows 7 years, what finance audits ask for), dev a
// quarter to half a year, local_parity a month to a quarter. Lifecycle
// transitions are kept as long as drift_history; the sync-debt timeline,
// a row per minute, domain, relay and partition, a week (local_parity),
// a month (dev) or a quarter (prod). An unknown environment gets prod's.
func DefaultPolicy(env string) Policy {
	switch env {
	case contract.EnvLocalParity:
		return Policy{History: 30 * Day, Rated: 90 * Day, Windows: 90 * Day, Progress: 7 * Day, Lifecycle: 30 * Day, SyncDebt: 7 * Day}
	case contract.EnvDev:
		return Policy{History: 90 * Day, Rated: 180 * Day, Windows: 180 * Day, Progress: 30 * Day, Lifecycle: 90 * Day, SyncDebt: 30 * Day}
	}
	return Policy{History: 400 * Day, Rated: 2557 * Day, Windows: 2557 * Day, Progress: 90 * Day, Lifecycle: 400 * Day, SyncDebt: 90 * Day}
}

// Override returns p with the fields of o that are not zero: a positive
// one sets the retention, a negative one keeps the table forever.
func (p Policy) Override(o Policy) Policy {
	set := func(d *time.Duration, v time.Duration) {
		if v != 0 {
			*d = v
		}
	}
	set(&p.History, o.History)
	set(&p.Rated, o.Rated)
	set(&p.Windows, o.Windows)
	set(&p.Progress, o.Progress)
	set(&p.Lifecycle, o.Lifecycle)
	set(&p.SyncDebt, o.SyncDebt)
	return p
}

// DefaultInterval is how often Run applies the policy.
const DefaultInterval = time.Hour

// Dropped is what one pass removed.
type Dropped struct {
	// Partitions are the dropped partitions per table (YYYYMM).
	Partitions map[string][]uint32
	// Kept are partitions past retention kept because they hold an open
	// finding's current row, per table.
	Kept map[string][]uint32
	// ProgressKeys is how many consumer_progress keys were deleted.
	ProgressKeys int
}

// table is one monthly-partitioned table and the query that returns the
// partitions (YYYYMM) holding an open finding's current row.
type table struct {
	name   string
	keep   func(Policy) time.Duration
	pinned string
}

// Each ? of a pinned query is contract.StatusOpen.
var tables = []table{
	{"drift_history", func(p Policy) time.Duration { return p.History },
		`SELECT DISTINCT toUInt32(toYYYYMM(at)) FROM drift_history
		 WHERE (evidence_id, version) IN (
		   SELECT evidence_id, max(version) FROM drift_history
		   WHERE evidence_id IN (SELECT evidence_id FROM drift_evidence FINAL WHERE status = ?)
		   GROUP BY evidence_id)`},
	{"rated_usage", func(p Policy) time.Duration { return p.Rated },
		`SELECT DISTINCT toUInt32(toYYYYMM(day)) FROM rated_usage
		 WHERE usage_id IN (SELECT usage_id FROM billing_mismatch FINAL WHERE status = ? AND usage_id != '')`},
	{"billing_window", func(p Policy) time.Duration { return p.Windows },
		`SELECT DISTINCT toUInt32(toYYYYMM(window_start)) FROM billing_window FINAL WHERE balanced = 0`},
	{"node_lifecycle_history", func(p Policy) time.Duration { return p.Lifecycle },
		`SELECT DISTINCT toUInt32(toYYYYMM(at)) FROM node_lifecycle_history
		 WHERE (node_id, seq) IN (SELECT node_id, max(seq) FROM node_lifecycle_history GROUP BY node_id)`},
	{"sync_debt_minute", func(p Policy) time.Duration { return p.SyncDebt },
		`SELECT toUInt32(0) FROM system.one WHERE 0`},
}

// Apply runs one pass of policy at now over the database conn uses.
func Apply(ctx context.Context, conn driver.Conn, policy Policy, now time.Time) (Dropped, error) {
	d := Dropped{Partitions: map[string][]uint32{}, Kept: map[string][]uint32{}}
	for _, t := range tables {
		keep := t.keep(policy)
		if keep <= 0 {
			continue
		}
		parts, err := partitions(ctx, conn, t.name)
		if err != nil {
			return d, err
		}
		cutoff := now.Add(-keep)
		var old []uint32
		for _, p := range parts {
			if monthEnd(p).After(cutoff) {
				continue
			}
			old = append(old, p)
		}
		if len(old) == 0 {
			continue
		}
		args := make([]any, strings.Count(t.pinned, "?"))
		for i := range args {
			args[i] = string(contract.StatusOpen)
		}
		pinned, err := uints(ctx, conn, t.pinned, args...)
		if err != nil {
			return d, fmt.Errorf("retention: open rows of %s: %w", t.name, err)
		}
		for _, p := range old {
			if pinned[p] {
				d.Kept[t.name] = append(d.Kept[t.name], p)
				continue
			}
			if err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION %d", t.name, p)); err != nil {
				return d, fmt.Errorf("retention: drop partition %d of %s: %w", p, t.name, err)
			}
			d.Partitions[t.name] = append(d.Partitions[t.name], p)
		}
	}
	if policy.Progress > 0 {
		n, err := dropStaleProgress(ctx, conn, now.Add(-policy.Progress))
		d.ProgressKeys = n
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// Run applies policy every interval until ctx ends; a failed pass is
// logged and retried at the next. Several processes may run it at once:
// dropping a partition twice is harmless.
func Run(ctx context.Context, conn driver.Conn, policy Policy, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		d, err := Apply(ctx, conn, policy, time.Now())
		if err != nil && ctx.Err() == nil {
			log.Warn("retention pass failed; retrying at the next", "err", err, "interval", interval)
		} else if len(d.Partitions) > 0 || d.ProgressKeys > 0 || len(d.Kept) > 0 {
			log.Info("retention", "dropped", d.Partitions, "kept_open", d.Kept, "progress_keys", d.ProgressKeys)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// monthEnd returns the start of the month after partition YYYYMM: the
// partition is past retention once that is before the cutoff.
func monthEnd(p uint32) time.Time {
	return time.Date(int(p/100), time.Month(p%100)+1, 1, 0, 0, 0, 0, time.UTC)
}

// partitions returns the partitions (YYYYMM) of table's active parts.
func partitions(ctx context.Context, conn driver.Conn, table string) ([]uint32, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT partition FROM system.parts WHERE database = currentDatabase() AND table = ? AND active", table)
	if err != nil {
		return nil, fmt.Errorf("retention: partitions of %s: %w", table, err)
	}
	defer rows.Close()
	var out []uint32
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		p, err := strconv.ParseUint(strings.Trim(s, "'"), 10, 32)
		if err != nil || p < 100001 || p%100 < 1 || p%100 > 12 {
			return nil, fmt.Errorf("retention: %s has partition %q, not a month (YYYYMM); Possible solutions: apply migration 012", table, s)
		}
		out = append(out, uint32(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, rows.Err()
}

// uints runs a query returning one UInt32 column and returns the set.
func uints(ctx context.Context, conn driver.Conn, query string, args ...any) (map[uint32]bool, error) {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uint32]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}

// dropStaleProgress deletes the consumer_progress keys whose newest row
// is older than cutoff, and returns how many.
func dropStaleProgress(ctx context.Context, conn driver.Conn, cutoff time.Time) (int, error) {
	rows, err := conn.Query(ctx, `SELECT consumer, partition FROM consumer_progress
		GROUP BY consumer, partition HAVING toUInt32(max(updated_at)) < ?`, uint32(cutoff.Unix()))
	if err != nil {
		return 0, fmt.Errorf("retention: stale consumer_progress: %w", err)
	}
	stale := map[string][]uint32{}
	n := 0
	for rows.Next() {
		var c string
		var p uint32
		if err := rows.Scan(&c, &p); err != nil {
			rows.Close()
			return 0, err
		}
		stale[c] = append(stale[c], p)
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for c, ps := range stale {
		list := make([]string, len(ps))
		for i, p := range ps {
			list[i] = strconv.FormatUint(uint64(p), 10)
		}
		// The consumer's name is quoted as a literal: mutations take no
		// query parameters on every server version.
		q := fmt.Sprintf("ALTER TABLE consumer_progress DELETE WHERE consumer = %s AND partition IN (%s)", quote(c), strings.Join(list, ","))
		if err := conn.Exec(ctx, q); err != nil {
			return 0, fmt.Errorf("retention: delete stale consumer_progress of %s: %w", c, err)
		}
	}
	return n, nil
}

// quote returns s as a ClickHouse string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
