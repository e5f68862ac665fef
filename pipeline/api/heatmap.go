package api

import (
	"net/http"
	"slices"
	"sort"

	"github.com/driftline/driftline/pipeline/contract"
)

func (s *Server) handleHeatmap(w http.ResponseWriter, r *http.Request) error {
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		return err
	}
	read := s.groups
	if countedFilter(f) {
		read = s.countGroups
	}
	groups, err := read(r.Context(), "heatmap", f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, foldHeatmap(f.Status, groups))
	return nil
}

// severityRank orders severities; unknown ones rank below every known one.
func severityRank(sev string) int {
	if i := slices.Index(severities, sev); i >= 0 {
		return len(severities) - i
	}
	return 0
}

func foldHeatmap(status string, groups []findingGroup) Heatmap {
	type key struct{ domain, class string }
	cells := map[key]*HeatCell{}
	domains := map[string]bool{}
	var extra []string
	for _, g := range groups {
		k := key{g.domain, g.classification}
		c := cells[k]
		if c == nil {
			c = &HeatCell{OwningDomain: g.domain, Classification: g.classification, MaxSeverity: g.severity}
			cells[k] = c
		}
		c.Count += g.count
		if g.severity == string(contract.SeverityCritical) {
			c.Critical += g.count
		}
		if severityRank(g.severity) > severityRank(c.MaxSeverity) {
			c.MaxSeverity = g.severity
		}
		domains[g.domain] = true
		if !slices.Contains(classifications, g.classification) && !slices.Contains(extra, g.classification) {
			extra = append(extra, g.classification)
		}
	}
	sort.Strings(extra)
	h := Heatmap{
		Status:          status,
		Domains:         make([]string, 0, len(domains)),
		Classifications: slices.Concat(classifications, extra),
		Cells:           make([]HeatCell, 0, len(cells)),
	}
	if h.Status == "" {
		h.Status = StatusAll
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
