package api

import (
	"net/http"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// handleAudit lists audit_log entries, newest first (auditors only).
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f reader.AuditFilter
	ps := []listParam{{"actor_id", &f.Actors, nil}, {"result", &f.Results, nil}, {"method", &f.Methods, nil},
		{"endpoint", &f.Endpoints, nil}, {"request_id", &f.RequestIDs, nil}}
	if err := parseParams(q, ps, "from", "to", "limit"); err != nil {
		return err
	}
	if err := parseTimeRange(q, &f.From, &f.To); err != nil {
		return err
	}
	var err error
	if f.Limit, err = parseLimit(q); err != nil {
		return err
	}
	entries, truncated, err := s.read.Audit(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apitypes.AuditPage{Entries: entries, Count: len(entries), Truncated: truncated})
	return nil
}
