package api

import (
	"net/http"

	"github.com/driftline/driftline/pipeline/contract"
)

// driftSorts are the orders of /v1/drift. The default keeps the "e1:"
// cursors of the first API version.
var driftSorts = []sortSpec{
	{name: "evidence_id"},
	{name: "attention_score", column: "attention_score", desc: true, bind: "?"},
	{name: "first_seen_at", column: "first_seen_at", bind: "toDateTime(?)"}, // oldest first
	{name: "last_seen_at", column: "last_seen_at", desc: true, bind: "toDateTime(?)"},
}

func findingKey(order sortSpec, f Finding) keyset {
	k := keyset{sort: order.name, id: f.EvidenceID}
	switch order.column {
	case "attention_score":
		k.key = f.AttentionScore
	case "first_seen_at":
		k.key = float64(f.FirstSeenAt.Unix())
	case "last_seen_at":
		k.key = float64(f.LastSeenAt.Unix())
	}
	return k
}

func (s *Server) handleDrift(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := parseFilter(q, "limit", "cursor", "sort", "format")
	if err != nil {
		return err
	}
	sortName, err := parseChoice(q, "sort", "evidence_id", sortNames(driftSorts))
	if err != nil {
		return err
	}
	order := findSort(driftSorts, sortName)
	var after *keyset
	if order.column == "" {
		id, err := parseCursor(q)
		if err != nil {
			return err
		}
		if id != "" {
			after = &keyset{sort: order.name, id: id}
		}
	} else if after, err = parseKeyset(q, sortName); err != nil {
		return err
	}
	format, err := negotiate(r, q)
	if err != nil {
		return err
	}
	if format != formatJSON {
		// Exports are the whole selection unless a limit is given.
		limit := 0
		if len(q["limit"]) > 0 {
			if limit, err = parseLimit(q); err != nil {
				return err
			}
		}
		rw := newRowWriter(w, format, "drift", findingExport)
		err := s.eachFinding(r.Context(), f, order, after, limit, func(f Finding) error { return rw.write(&f) })
		return s.endExport(r, "drift", rw.close(err != nil), err)
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	// One row more than the page says whether another page follows, so the
	// last page never carries a cursor to an empty page.
	rows, err := s.findings(r.Context(), f, order, after, limit+1)
	if err != nil {
		return err
	}
	page := DriftPage{Findings: rows}
	if len(rows) > limit {
		page.Findings = rows[:limit]
		last := rows[limit-1]
		if order.column == "" {
			page.NextCursor = encodeCursor(last.EvidenceID)
		} else {
			page.NextCursor = encodeKeyset(findingKey(order, last))
		}
	}
	page.Count = len(page.Findings)
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) handleDriftDetail(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(r.URL.Query()); err != nil {
		return err
	}
	id := r.PathValue("evidence_id")
	f, ok, err := s.finding(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: "no finding with evidence_id " + id})
		return nil
	}
	hist, err := s.history(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, DriftDetail{Finding: f, History: hist, Action: recommend(f)})
	return nil
}

// postureSummary says what each posture means for the resource.
var postureSummary = map[string]string{
	string(contract.PostureQuarantine):     "Quarantine the resource: keep it out of scheduling and traffic, and do not delete it until ownership is settled.",
	string(contract.PostureBlockAdmission): "Block admissions to the affected capacity until the finding resolves.",
	string(contract.PostureRetry):          "The platform retries reconciliation by itself at next_attempt_at; no operator action yet.",
	string(contract.PostureOperatorReview): "An operator must review the evidence and decide; automation will not act on it.",
}

// recommend derives the recommended action from a finding's posture and
// runbook, which the joiner sets.
func recommend(f Finding) Action {
	if f.Status == string(contract.StatusResolved) {
		return Action{
			Posture: f.Posture,
			Runbook: f.Runbook,
			Summary: "Resolved: record and provider agree again; nothing to do. The evidence is kept.",
		}
	}
	a := Action{Required: true, Posture: f.Posture, Runbook: f.Runbook, Summary: postureSummary[f.Posture]}
	if a.Summary == "" {
		a.Summary = "Follow the runbook."
	}
	if f.Posture == string(contract.PostureRetry) {
		a.NextAttemptAt = f.NextAttemptAt
	}
	return a
}
