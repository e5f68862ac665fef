package api

import (
	"net/http"
	"slices"
	"sort"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

func (s *Server) handleHeatmap(w http.ResponseWriter, r *http.Request) error {
	f, err := parseFilter(r.URL.Query(), s.opts.Now())
	if err != nil {
		return err
	}
	groups, err := s.read.Heatmap(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, foldHeatmap(f.Status, groups))
	return nil
}

// severityRank orders severities; unknown ones rank below every known one.
func severityRank(sev string) int {
	if i := slices.Index(apitypes.Severities, sev); i >= 0 {
		return len(apitypes.Severities) - i
	}
	return 0
}

func foldHeatmap(status string, groups []reader.FindingGroup) apitypes.Heatmap {
	type key struct{ domain, class string }
	cells := map[key]*apitypes.HeatCell{}
	domains := map[string]bool{}
	var extra []string
	for _, g := range groups {
		k := key{g.OwningDomain, g.Classification}
		c := cells[k]
		if c == nil {
			c = &apitypes.HeatCell{OwningDomain: g.OwningDomain, Classification: g.Classification, MaxSeverity: g.Severity}
			cells[k] = c
		}
		c.Count += g.Count
		if g.Severity == string(contract.SeverityCritical) {
			c.Critical += g.Count
		}
		if severityRank(g.Severity) > severityRank(c.MaxSeverity) {
			c.MaxSeverity = g.Severity
		}
		domains[g.OwningDomain] = true
		if !slices.Contains(apitypes.Classifications, g.Classification) && !slices.Contains(extra, g.Classification) {
			extra = append(extra, g.Classification)
		}
	}
	sort.Strings(extra)
	h := apitypes.Heatmap{
		Status:          status,
		Domains:         make([]string, 0, len(domains)),
		Classifications: slices.Concat(apitypes.Classifications, extra),
		Cells:           make([]apitypes.HeatCell, 0, len(cells)),
	}
	if h.Status == "" {
		h.Status = apitypes.StatusAll
	}
	for d := range domains {
		h.Domains = append(h.Domains, d)
	}
	sort.Strings(h.Domains)
	for _, d := range h.Domains {
		for _, c := range h.Classifications {
			if cell := cells[key{d, c}]; cell != nil {
				h.Cells = append(h.Cells, *cell)
			}
		}
	}
	return h
}
