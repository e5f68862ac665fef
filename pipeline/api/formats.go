package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/export"
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

// HeaderExportRowCap names, on an export that gave no limit, the most rows
// it holds (Options.MaxExportRows).
const HeaderExportRowCap = "Driftline-Export-Row-Cap"

// formatAndLimit negotiates the answer format and reads the limit: a
// page's, or an export's, which is the whole selection up to
// MaxExportRows unless a limit is given.
func (s *Server) formatAndLimit(w http.ResponseWriter, r *http.Request, q url.Values) (format string, limit int, err error) {
	if format, err = negotiate(r, q); err != nil {
		return "", 0, err
	}
	if format != formatJSON && len(q["limit"]) == 0 {
		w.Header().Set(HeaderExportRowCap, strconv.Itoa(s.opts.MaxExportRows))
		return format, s.opts.MaxExportRows, nil
	}
	limit, err = parseLimit(q)
	return format, limit, err
}

// pageOrExport serves the export of a paged listing: when the request
// asks for Arrow or CSV, it streams as name the rows each yields up to
// the export's limit and answers done. For JSON it answers the page's
// limit, for the caller to read the page.
func pageOrExport[T any](s *Server, w http.ResponseWriter, r *http.Request, q url.Values, name string, cols []export.Column[T],
	each func(limit int, fn func(T) error) error) (limit int, done bool, err error) {
	format, limit, err := s.formatAndLimit(w, r, q)
	if err != nil || format == formatJSON {
		return limit, false, err
	}
	return limit, true, exportRows(s, w, r, format, name, cols, func(fn func(T) error) error { return each(limit, fn) })
}

// exportRows streams the rows each yields as the export name in format,
// after writing the read's audit entry.
func exportRows[T any](s *Server, w http.ResponseWriter, r *http.Request, format, name string, cols []export.Column[T],
	each func(fn func(T) error) error) error {
	if err := s.auditRead(r); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apitypes.ErrorBody{Error: err.Error(), RequestID: requestID(r)})
		return nil
	}
	rw := export.NewRowWriter(w, format, name, cols)
	err := each(func(v T) error { return rw.Write(&v) })
	return s.endExport(r, name, rw.Close(err != nil), err)
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
