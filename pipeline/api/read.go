package api

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// The SQL here runs on ClickHouse 18.16 and on current releases: FINAL
// with a plain WHERE (never PREWHERE, which filters before versions are
// collapsed), no window functions, arguments bound by the client.

// readQuery runs one named query, counting failures per name.
func (s *Server) readQuery(ctx context.Context, name, sql string, args ...any) (driver.Rows, error) {
	rows, err := s.opts.DB.Query(ctx, sql, args...)
	if err != nil {
		s.metrics.chErrors.WithLabelValues(name).Inc()
		return nil, fmt.Errorf("clickhouse query %s: %w", name, err)
	}
	return rows, nil
}

// scanAll calls scan for each row and closes rows.
func (s *Server) scanAll(name string, rows driver.Rows, scan func(driver.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			s.metrics.chErrors.WithLabelValues(name).Inc()
			return fmt.Errorf("clickhouse query %s: scan: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		s.metrics.chErrors.WithLabelValues(name).Inc()
		return fmt.Errorf("clickhouse query %s: %w", name, err)
	}
	return nil
}

const findingColumns = `evidence_id, correlation_id, resource_family, product_id, owning_domain,
	owning_package, domain_id, record_type, record_id, expected_state, expected_version,
	provider, provider_id, observed_state, observed_version, observed_at,
	classification, severity, status, first_seen_at, last_seen_at, resolved_at,
	retry_count, posture, next_attempt_at, runbook, attention_score, version, updated_at`

// scanFinding scans the findingColumns of a row, then the extra columns
// that follow them into extra.
func scanFinding(rows driver.Rows, extra ...any) (apitypes.Finding, error) {
	var (
		f                                                          apitypes.Finding
		observedAt, firstSeen, lastSeen, resolved, next, updatedAt time.Time
	)
	err := rows.Scan(append([]any{&f.EvidenceID, &f.CorrelationID, &f.ResourceFamily, &f.ProductID, &f.OwningDomain,
		&f.OwningPackage, &f.DomainID, &f.RecordType, &f.RecordID, &f.ExpectedState, &f.ExpectedVersion,
		&f.Provider, &f.ProviderID, &f.ObservedState, &f.ObservedVersion, &observedAt,
		&f.Classification, &f.Severity, &f.Status, &firstSeen, &lastSeen, &resolved,
		&f.RetryCount, &f.Posture, &next, &f.Runbook, &f.AttentionScore, &f.Version, &updatedAt}, extra...)...)
	if err != nil {
		return f, err
	}
	f.ObservedAt = nullTime(observedAt)
	f.FirstSeenAt = firstSeen.UTC()
	f.LastSeenAt = lastSeen.UTC()
	f.ResolvedAt = nullTime(resolved)
	f.NextAttemptAt = nullTime(next)
	f.UpdatedAt = nullTime(updatedAt)
	if math.IsNaN(f.AttentionScore) || math.IsInf(f.AttentionScore, 0) {
		f.AttentionScore = 0 // JSON has no NaN; a broken score must not break the listing
	}
	return f, nil
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

// findings reads up to limit current findings matching f after the
// cursor position, in order.
func (s *Server) findings(ctx context.Context, f Filter, order sortSpec, after *keyset, limit int) ([]apitypes.Finding, error) {
	if order.column == "" && limit > 0 {
		cursor := ""
		if after != nil {
			cursor = after.id
		}
		return s.pageByMarks(ctx, f, cursor, limit)
	}
	out := []apitypes.Finding{}
	err := s.eachFinding(ctx, f, order, after, limit, func(f apitypes.Finding) error {
		out = append(out, f)
		return nil
	})
	return out, err
}

// eachFinding streams the current findings matching f after the cursor
// position, in order, at most limit (0: all), calling fn as rows arrive.
func (s *Server) eachFinding(ctx context.Context, f Filter, order sortSpec, after *keyset, limit int, fn func(apitypes.Finding) error) error {
	conds, args := f.where(s.opts.Now())
	if after != nil {
		c, a := order.after(*after, "evidence_id")
		conds = append(conds, c)
		args = append(args, a...)
	}
	sql := "SELECT " + findingColumns + " FROM drift_evidence FINAL" + whereClause(conds) + order.orderBy("evidence_id")
	if limit > 0 {
		sql += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.readQuery(ctx, "drift_list", sql, args...)
	if err != nil {
		return err
	}
	return s.scanAll("drift_list", rows, func(r driver.Rows) error {
		f, err := scanFinding(r)
		if err != nil {
			return err
		}
		return fn(f)
	})
}

// finding reads the current row of one finding; ok is false if there is
// none.
func (s *Server) finding(ctx context.Context, id string) (f apitypes.Finding, ok bool, err error) {
	fs, err := s.currentFindings(ctx, "drift_detail", nil, nil, []string{id})
	if err != nil || len(fs) == 0 {
		return f, false, err
	}
	return fs[0], true, nil
}

// history reads the transitions of one finding, ordered by version.
func (s *Server) history(ctx context.Context, id string) ([]apitypes.HistoryEntry, error) {
	rows, err := s.readQuery(ctx, "drift_history", `SELECT version, transition, classification, severity,
	status, posture, expected_state, observed_state, observed_version, retry_count, at, correlation_id
	FROM drift_history FINAL WHERE evidence_id = ? ORDER BY version`, id)
	if err != nil {
		return nil, err
	}
	out := []apitypes.HistoryEntry{}
	err = s.scanAll("drift_history", rows, func(r driver.Rows) error {
		var h apitypes.HistoryEntry
		err := r.Scan(&h.Version, &h.Transition, &h.Classification, &h.Severity, &h.Status, &h.Posture,
			&h.ExpectedState, &h.ObservedState, &h.ObservedVersion, &h.RetryCount, &h.At, &h.CorrelationID)
		h.At = h.At.UTC()
		out = append(out, h)
		return err
	})
	return out, err
}

// findingGroup counts current findings sharing these attributes.
type findingGroup struct {
	domain, classification, severity, status, posture string
	count                                             uint64
}

// groups counts current findings matching f by owning_domain,
// classification, severity, status and posture: few enough rows to fold
// into any of the summaries in Go.
func (s *Server) groups(ctx context.Context, name string, f Filter) ([]findingGroup, error) {
	conds, args := f.where(s.opts.Now())
	sql := `SELECT owning_domain, classification, severity, status, posture, count()
	FROM drift_evidence FINAL` + whereClause(conds) + `
	GROUP BY owning_domain, classification, severity, status, posture`
	rows, err := s.readQuery(ctx, name, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []findingGroup
	err = s.scanAll(name, rows, func(r driver.Rows) error {
		var g findingGroup
		err := r.Scan(&g.domain, &g.classification, &g.severity, &g.status, &g.posture, &g.count)
		out = append(out, g)
		return err
	})
	return out, err
}

// progressRow is one consumer_progress row.
type progressRow struct {
	consumer             string
	partition            uint32
	watermark, updatedAt time.Time
	events, findingsOpen uint64
}

func (s *Server) progress(ctx context.Context) ([]progressRow, error) {
	rows, err := s.readQuery(ctx, "consumer_progress", `SELECT consumer, partition, watermark, events,
	findings_open, updated_at FROM consumer_progress FINAL ORDER BY consumer, partition`)
	if err != nil {
		return nil, err
	}
	var out []progressRow
	err = s.scanAll("consumer_progress", rows, func(r driver.Rows) error {
		var p progressRow
		err := r.Scan(&p.consumer, &p.partition, &p.watermark, &p.events, &p.findingsOpen, &p.updatedAt)
		out = append(out, p)
		return err
	})
	return out, err
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}
