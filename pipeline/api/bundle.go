package api

import (
	"fmt"
	"net/http"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/export"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// MaxBundleFindings bounds one evidence bundle: an incident or release
// names a handful of findings, not a fleet.
const MaxBundleFindings = 10000

// bundleParams select the findings of a bundle into sel; at least one is
// required.
func bundleParams(sel *reader.BundleSelection) []listParam {
	return []listParam{
		{"evidence_id", &sel.EvidenceIDs, nil},
		{"correlation_id", &sel.CorrelationIDs, nil},
		{"node_id", &sel.NodeIDs, nil},
	}
}

// handleBundle exports the evidence bundle of one incident or release: the
// findings it names, whatever their status, each with its history and
// recommended action, as one Arrow IPC file or Parquet file.
func (s *Server) handleBundle(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var sel reader.BundleSelection
	ps := bundleParams(&sel)
	if err := checkKnown(q, paramNames(ps, "format")...); err != nil {
		return err
	}
	format, err := parseChoice(q, "format", export.BundleArrow, []string{export.BundleArrow, export.BundleParquet})
	if err != nil {
		return err
	}
	if err := parseLists(q, ps); err != nil {
		return err
	}
	if sel.Empty() {
		return &ParamError{Param: "evidence_id", Reason: "name the bundle's findings with evidence_id, correlation_id or node_id",
			Allowed: paramNames(ps)}
	}
	ctx := r.Context()
	findings, err := s.read.BundleFindings(ctx, sel, MaxBundleFindings+1)
	if err != nil {
		return err
	}
	if len(findings) > MaxBundleFindings {
		return &ParamError{Param: "correlation_id", Reason: fmt.Sprintf("the selection holds more than %d findings; a bundle is one incident, narrow it", MaxBundleFindings)}
	}
	if len(findings) == 0 {
		writeJSON(w, http.StatusNotFound, apitypes.ErrorBody{Error: "no finding matches the bundle selection"})
		return nil
	}
	hist, err := s.read.Histories(ctx, findingIDs(findings))
	if err != nil {
		return err
	}

	rows := make([]export.BundleRow, len(findings))
	for i, f := range findings {
		rows[i] = export.BundleRow{Finding: f, History: hist[f.EvidenceID], Action: recommend(f).Summary}
	}
	name := "evidence-bundle-" + s.opts.Now().UTC().Format("20060102T150405Z")
	bw, err := export.NewBundleWriter(w, format, name)
	if err != nil {
		return err
	}
	werr := bw.Write(rows)
	return s.endExport(r, "bundle", bw.Close(), werr)
}
