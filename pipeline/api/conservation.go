package api

import (
	"net/http"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// The billing status surfaces: the conservation windows (billing_window)
// and the financial-automation flag (billing_mismatch).
// docs/billing-model.md defines both.

func (s *Server) handleConservation(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), billingAliases)
	var f reader.WindowFilter
	ps := []listParam{{"tenant", &f.Tenants, nil}, {"product", &f.Products, nil}, {"currency", &f.Currencies, nil}}
	if err := parseParams(q, ps, "from", "to", "unbalanced", "limit"); err != nil {
		return err
	}
	if err := parseTimeRange(q, &f.From, &f.To); err != nil {
		return err
	}
	unbalanced, err := parseChoice(q, "unbalanced", "false", []string{"false", "true"})
	if err != nil {
		return err
	}
	f.Unbalanced = unbalanced == "true"
	if f.Limit, err = parseLimit(q); err != nil {
		return err
	}
	ws, truncated, err := s.read.ConservationWindows(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apitypes.ConservationPage{Windows: ws, Count: len(ws), Truncated: truncated})
	return nil
}

func (s *Server) handleAutomation(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), map[string]string{"tenant": "tenant_id", "product": "product_id"})
	if err := allowOnly(q, "tenant_id", "product_id"); err != nil {
		return err
	}
	tenant, ok := single(q, "tenant_id")
	if !ok || tenant == "" {
		return &ParamError{Param: "tenant_id", Reason: "give exactly one tenant_id"}
	}
	product := ""
	if len(q["product_id"]) > 0 {
		if product, ok = single(q, "product_id"); !ok || product == "" {
			return &ParamError{Param: "product_id", Reason: "give at most one non-empty product_id"}
		}
	}
	a, err := s.read.Automation(r.Context(), tenant, product)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}
