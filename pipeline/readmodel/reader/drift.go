package reader

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
)

const findingColumns = `evidence_id, correlation_id, resource_family, product_id, owning_domain,
	owning_package, domain_id, record_type, record_id, expected_state, expected_version,
	provider, provider_id, observed_state, observed_version, observed_at,
	classification, severity, status, first_seen_at, last_seen_at, resolved_at,
	retry_count, posture, next_attempt_at, runbook, attention_score, version, updated_at,
	acknowledged_by, assignee, suppressed_until, action_state, last_action_id`

// scanFinding scans the findingColumns of a row, then the extra columns
// that follow them into extra.
func scanFinding(rows driver.Rows, extra ...any) (apitypes.Finding, error) {
	var (
		f                                                                      apitypes.Finding
		observedAt, firstSeen, lastSeen, resolved, next, updatedAt, suppressed time.Time
	)
	err := rows.Scan(append([]any{&f.EvidenceID, &f.CorrelationID, &f.ResourceFamily, &f.ProductID, &f.OwningDomain,
		&f.OwningPackage, &f.DomainID, &f.RecordType, &f.RecordID, &f.ExpectedState, &f.ExpectedVersion,
		&f.Provider, &f.ProviderID, &f.ObservedState, &f.ObservedVersion, &observedAt,
		&f.Classification, &f.Severity, &f.Status, &firstSeen, &lastSeen, &resolved,
		&f.RetryCount, &f.Posture, &next, &f.Runbook, &f.AttentionScore, &f.Version, &updatedAt,
		&f.AcknowledgedBy, &f.Assignee, &suppressed, &f.ActionState, &f.LastActionID}, extra...)...)
	if err != nil {
		return f, err
	}
	f.ObservedAt = nullTime(observedAt)
	f.FirstSeenAt = firstSeen.UTC()
	f.LastSeenAt = lastSeen.UTC()
	f.ResolvedAt = nullTime(resolved)
	f.NextAttemptAt = nullTime(next)
	f.UpdatedAt = nullTime(updatedAt)
	f.SuppressedUntil = nullTime(suppressed)
	if math.IsNaN(f.AttentionScore) || math.IsInf(f.AttentionScore, 0) {
		f.AttentionScore = 0 // JSON has no NaN; a broken score must not break the listing
	}
	return f, nil
}

// findingRow scans the findingColumns of a row.
func findingRow(r driver.Rows) (apitypes.Finding, error) { return scanFinding(r) }

// Findings reads up to limit current findings matching f after the
// position after (nil: from the first), in order.
func (rd *Reader) Findings(ctx context.Context, f Filter, order Sort, after *Keyset, limit int) ([]apitypes.Finding, error) {
	if order.column == "" && limit > 0 {
		cursor := ""
		if after != nil {
			cursor = after.ID
		}
		return rd.pageByMarks(ctx, f, cursor, limit)
	}
	if limit > 0 {
		conds, args := f.where()
		return rankedPage(ctx, rd, "drift_list", findingTable, order, conds, args, after, limit)
	}
	out := []apitypes.Finding{}
	err := rd.EachFinding(ctx, f, order, after, limit, func(f apitypes.Finding) error {
		out = append(out, f)
		return nil
	})
	return out, err
}

// EachFinding streams the current findings matching f after the position
// after, in order, at most limit (0: all), calling fn as rows arrive.
// When few rows of any version match f (eachRankedMax), it reads them as
// ranked pages; else it collapses drift_evidence with FINAL.
func (rd *Reader) EachFinding(ctx context.Context, f Filter, order Sort, after *Keyset, limit int, fn func(apitypes.Finding) error) error {
	conds, args := f.where()
	rows, table, err := rd.count(ctx, "drift_export_rows", "drift_evidence", conds, args)
	if err != nil {
		return err
	}
	if rows <= eachRankedMax(table) {
		return eachRanked(ctx, rd, "drift_export", findingTable, order, conds, args, after, limit, fn)
	}
	sql, args := listSQL(findingColumns, "drift_evidence", "evidence_id", conds, args, order, after, limit)
	return eachRow(ctx, rd, "drift_list", sql, args, findingRow, fn)
}

// Finding reads the current row of one finding; ok is false if there is
// none.
func (rd *Reader) Finding(ctx context.Context, id string) (f apitypes.Finding, ok bool, err error) {
	fs, err := rd.currentFindings(ctx, "drift_detail", nil, nil, []string{id})
	if err != nil || len(fs) == 0 {
		return f, false, err
	}
	return fs[0], true, nil
}

// History reads the transitions of one finding, ordered by version.
func (rd *Reader) History(ctx context.Context, id string) ([]apitypes.HistoryEntry, error) {
	return list(ctx, rd, "drift_history", "SELECT "+historyColumns+
		" FROM drift_history FINAL WHERE evidence_id = ? ORDER BY version", []any{id}, []apitypes.HistoryEntry{},
		func(r driver.Rows) (apitypes.HistoryEntry, error) { return scanHistory(r) })
}

const historyColumns = `version, transition, classification, severity,
	status, posture, expected_state, observed_state, observed_version, retry_count, at, correlation_id,
	action_state, action, action_id, actor_id, reason, refusal`

// scanHistory scans the columns before in a row, then the historyColumns.
func scanHistory(r driver.Rows, before ...any) (apitypes.HistoryEntry, error) {
	var h apitypes.HistoryEntry
	err := r.Scan(append(before, &h.Version, &h.Transition, &h.Classification, &h.Severity, &h.Status, &h.Posture,
		&h.ExpectedState, &h.ObservedState, &h.ObservedVersion, &h.RetryCount, &h.At, &h.CorrelationID,
		&h.ActionState, &h.Action, &h.ActionID, &h.ActorID, &h.Reason, &h.Refusal)...)
	h.At = h.At.UTC()
	return h, err
}

// Histories reads the transitions of several findings, ordered by
// version, by evidence_id.
func (rd *Reader) Histories(ctx context.Context, ids []string) (map[string][]apitypes.HistoryEntry, error) {
	out := map[string][]apitypes.HistoryEntry{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	err := rd.each(ctx, "drift_history", "SELECT evidence_id, "+historyColumns+
		" FROM drift_history FINAL WHERE "+inList("evidence_id", len(ids))+" ORDER BY evidence_id, version", args,
		func(r driver.Rows) error {
			var id string
			h, err := scanHistory(r, &id)
			out[id] = append(out[id], h)
			return err
		})
	return out, err
}

// FindingsOf reads every current finding of one provider identity, open
// ones first. A finding's evidence id is its classification and the
// identity's key (drift.EvidenceID), so these are the current rows of at
// most drift.NumClasses evidence ids, read by key.
func (rd *Reader) FindingsOf(ctx context.Context, provider, providerID string) ([]apitypes.Finding, error) {
	key := contract.IdentityKey(provider, providerID)
	ids := make([]string, 0, drift.NumClasses)
	for c := range drift.NumClasses {
		ids = append(ids, drift.EvidenceID(c, key))
	}
	fs, err := rd.currentFindings(ctx, "node_findings", []string{"provider = ?", "provider_id = ?"}, []any{provider, providerID}, ids)
	if err != nil {
		return nil, err
	}
	// currentFindings returns them in evidence_id order; the open ones
	// move first.
	open := func(f apitypes.Finding) bool { return f.Status == string(contract.StatusOpen) }
	slices.SortStableFunc(fs, func(a, b apitypes.Finding) int {
		switch {
		case open(a) == open(b):
			return 0
		case open(a):
			return -1
		}
		return 1
	})
	return fs, nil
}

// BundleSelection names the findings of an evidence bundle; each list
// widens it (OR): an incident is its correlation ids plus the findings
// and nodes an operator added to it.
type BundleSelection struct {
	EvidenceIDs    []string
	CorrelationIDs []string
	NodeIDs        []string // the findings of provider maas for these nodes
}

// Empty reports whether s names nothing.
func (s BundleSelection) Empty() bool {
	return len(s.EvidenceIDs) == 0 && len(s.CorrelationIDs) == 0 && len(s.NodeIDs) == 0
}

// BundleFindings reads the current rows of the findings s selects,
// whatever their status, in evidence_id order, at most limit.
func (rd *Reader) BundleFindings(ctx context.Context, s BundleSelection, limit int) ([]apitypes.Finding, error) {
	var (
		ors  []string
		args []any
	)
	for _, c := range []listColumn{{"evidence_id", s.EvidenceIDs}, {"correlation_id", s.CorrelationIDs}, {"provider_id", s.NodeIDs}} {
		conds, a := listWhere([]listColumn{c})
		if len(conds) == 0 {
			continue
		}
		cond := conds[0]
		if c.column == "provider_id" {
			cond = "(provider = 'maas' AND " + cond + ")"
		}
		ors = append(ors, cond)
		args = append(args, a...)
	}
	if len(ors) == 0 {
		return nil, nil
	}
	// A correlation id or a node is no range of evidence ids: a ranked
	// read in evidence_id order, not a FINAL scan of the table.
	return rankedPage(ctx, rd, "bundle", findingTable, FindSort(DriftSorts, "evidence_id"),
		[]string{"(" + strings.Join(ors, " OR ") + ")"}, args, nil, limit)
}

// FindingGroup counts current findings sharing these attributes.
type FindingGroup struct {
	OwningDomain, Classification, Severity, Status, Posture string
	Count                                                   uint64
}

// groupKeysBound is the most rows, of any version, meeting a filter that
// groups counts from their evidence ids' current rows; above it, it
// collapses drift_evidence with FINAL.
var groupKeysBound uint64 = 1_000_000

// groups counts current findings matching f by owning_domain,
// classification, severity, status and posture, reading drift_evidence:
// few enough rows to fold into any of the summaries in Go.
//
// When few rows meet f (a tag, a recent first-seen bound), it takes the
// evidence ids of the rows that meet f whatever their version (a superset
// of the findings whose current row does), every row of those ids, the
// current one of each (the highest version, then the latest updated_at,
// as a merge would) and counts those that still meet f: exactly what
// FINAL counts, without collapsing the whole table on one thread.
func (rd *Reader) groups(ctx context.Context, name string, f Filter) ([]FindingGroup, error) {
	conds, args := f.where()
	rows, _, err := rd.count(ctx, name+"_rows", "drift_evidence", conds, args)
	if err != nil {
		return nil, err
	}
	if rows > groupKeysBound {
		sql := `SELECT owning_domain, classification, severity, status, posture, count()
	FROM drift_evidence FINAL` + whereClause(conds) + `
	GROUP BY owning_domain, classification, severity, status, posture`
		return rd.scanGroups(ctx, name, sql, args)
	}
	sql := `SELECT owning_domain, classification, severity, status, posture, count() FROM (
		SELECT evidence_id, version, updated_at, owning_domain, classification, severity, status, posture, ` + matchColumn(conds) + ` AS matched
		FROM drift_evidence WHERE evidence_id IN (SELECT evidence_id FROM drift_evidence` + whereClause(conds) + `)
		ORDER BY evidence_id, version DESC, updated_at DESC LIMIT 1 BY evidence_id)
	WHERE matched GROUP BY owning_domain, classification, severity, status, posture`
	return rd.scanGroups(ctx, name, sql, append(slices.Clip(args), args...))
}

func (rd *Reader) scanGroups(ctx context.Context, name, sql string, args []any) ([]FindingGroup, error) {
	return list(ctx, rd, name, sql, args, nil, func(r driver.Rows) (FindingGroup, error) {
		var g FindingGroup
		err := r.Scan(&g.OwningDomain, &g.Classification, &g.Severity, &g.Status, &g.Posture, &g.Count)
		return g, err
	})
}
