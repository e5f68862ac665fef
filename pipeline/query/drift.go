package query

import (
	"net/http"
)

func (s *Server) handleDrift(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := parseFilter(q, "limit", "cursor")
	if err != nil {
		return err
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	after, err := parseCursor(q)
	if err != nil {
		return err
	}
	// One row more than the page says whether another page follows, so the
	// last page never carries a cursor to an empty page.
	rows, err := s.findings(r.Context(), f, after, limit+1)
	if err != nil {
		return err
	}
	page := DriftPage{Findings: rows}
	if len(rows) > limit {
		page.Findings = rows[:limit]
		page.NextCursor = encodeCursor(rows[limit-1].EvidenceID)
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
	PostureQuarantine:     "Quarantine the resource: keep it out of scheduling and traffic, and do not delete it until ownership is settled.",
	PostureBlockAdmission: "Block admissions to the affected capacity until the finding resolves.",
	PostureRetry:          "The platform retries reconciliation by itself at next_attempt_at; no operator action yet.",
	PostureOperatorReview: "An operator must review the evidence and decide; automation will not act on it.",
}

// recommend derives the recommended action from a finding's posture and
// runbook, which the joiner sets.
func recommend(f Finding) Action {
	if f.Status == StatusResolved {
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
	if f.Posture == PostureRetry {
		a.NextAttemptAt = f.NextAttemptAt
	}
	return a
}
