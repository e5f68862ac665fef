package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/export"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// formatJSON is the listings' default answer format; package export has
// the others.
const formatJSON = "json"

// negotiate picks the answer format: the format parameter if given, else
// the Accept header (Arrow stream or CSV), else JSON.
func negotiate(r *http.Request, q url.Values) (string, error) {
	allowed := []string{formatJSON, export.CSV, export.Arrow}
	if len(q["format"]) > 0 {
		return parseChoice(q, "format", formatJSON, allowed)
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case export.MediaArrowStream:
			return export.Arrow, nil
		case export.MediaCSV:
			return export.CSV, nil
		case "application/json":
			return formatJSON, nil
		}
	}
	return formatJSON, nil
}

// exportMismatches streams the selected mismatches in format.
func (s *Server) exportMismatches(w http.ResponseWriter, r *http.Request, format string, f reader.MismatchFilter, order reader.Sort, k *reader.Keyset, limit int) error {
	rw := export.NewRowWriter(w, format, "billing_mismatches", export.MismatchColumns)
	err := s.read.EachMismatch(r.Context(), f, order, k, limit, func(m apitypes.BillingMismatch) error { return rw.Write(&m) })
	return s.endExport(r, "billing_mismatches", rw.Close(err != nil), err)
}

// endExport logs a failed export: the status line is already sent, so the
// error cannot become an error answer.
func (s *Server) endExport(r *http.Request, name string, closeErr, err error) error {
	if err == nil {
		err = closeErr
	}
	if err != nil {
		s.opts.Logger.Warn("export failed", "export", name, "url", r.URL.String(), "err", err)
	}
	return nil
}
