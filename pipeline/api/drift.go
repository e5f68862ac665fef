package api

import (
	"net/http"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/export"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

func (s *Server) handleDrift(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := parseFilter(q, s.opts.Now(), "limit", "cursor", "sort", "format")
	if err != nil {
		return err
	}
	order, err := parseSort(q, reader.DriftSorts)
	if err != nil {
		return err
	}
	var after *reader.Keyset
	if order.ByKey() {
		id, err := parseCursor(q)
		if err != nil {
			return err
		}
		if id != "" {
			after = &reader.Keyset{Sort: order.Name, ID: id}
		}
	} else if after, err = parseKeyset(q, order.Name); err != nil {
		return err
	}
	limit, done, err := pageOrExport(s, w, r, q, "drift", export.FindingColumns, func(limit int, fn func(apitypes.Finding) error) error {
		return s.read.EachFinding(r.Context(), f, order, after, limit, fn)
	})
	if done || err != nil {
		return err
	}
	// One row more than the page says whether another page follows, so the
	// last page never carries a cursor to an empty page.
	rows, err := s.read.Findings(r.Context(), f, order, after, limit+1)
	if err != nil {
		return err
	}
	page := apitypes.DriftPage{Findings: rows}
	if len(rows) > limit {
		page.Findings = rows[:limit]
		last := rows[limit-1]
		if order.ByKey() {
			page.NextCursor = encodeCursor(last.EvidenceID)
		} else {
			page.NextCursor = encodeKeyset(order.FindingKey(last))
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
	f, ok, err := s.read.Finding(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, apitypes.ErrorBody{Error: "no finding with evidence_id " + id})
		return nil
	}
	hist, err := s.read.History(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apitypes.DriftDetail{Finding: f, History: hist, Action: recommend(f)})
	return nil
}

// postureSummary says what each posture means for the resource.
var postureSummary = map[string]string{
	string(contract.PostureQuarantine):     "Quarantine the resource: keep it out of scheduling and traffic, and do not delete it until ownership is settled.",
	string(contract.PostureBlockAdmission): "Block admissions to the affected capacity until the finding resolves.",
	string(contract.PostureRetry):          "Retry reconciliation from next_attempt_at with the retry action: the platform's controllers receive a request, and the finding shows it pending until an observation resolves it or its deadline sends it to operator review.",
	string(contract.PostureOperatorReview): "An operator must review the evidence and decide; automation will not act on it.",
}

// recommend derives the recommended action from a finding's posture and
// runbook, which the joiner sets.
func recommend(f apitypes.Finding) apitypes.Action {
	if f.Status == string(contract.StatusResolved) {
		return apitypes.Action{
			Posture: f.Posture,
			Runbook: f.Runbook,
			Summary: "Resolved: record and provider agree again; nothing to do. The evidence is kept.",
		}
	}
	a := apitypes.Action{Required: true, Posture: f.Posture, Runbook: f.Runbook, Summary: postureSummary[f.Posture]}
	if a.Summary == "" {
		a.Summary = "Follow the runbook."
	}
	switch contract.ActionState(f.ActionState) {
	case contract.ActionPending:
		a.Summary = "A request to the platform's controllers is pending (last action " + f.LastActionID + "): wait for an observation to resolve the finding, or for its deadline. " + a.Summary
	case contract.ActionOperatorReview:
		a.Summary = "The request to the platform's controllers passed its deadline with the finding still open: review the evidence and decide. " + a.Summary
	}
	if f.Posture == string(contract.PostureRetry) {
		a.NextAttemptAt = f.NextAttemptAt
	}
	return a
}
