package api

import (
	"fmt"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/driftline/driftline/pipeline/api/apitypes"
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

// historyType is the Arrow type of a finding's history in a bundle.
var historyType = arrow.ListOf(arrow.StructOf(
	arrow.Field{Name: "version", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "transition", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "classification", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "severity", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "status", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "posture", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "expected_state", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "observed_state", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "observed_version", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "retry_count", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "at", Type: tsType},
	arrow.Field{Name: "correlation_id", Type: arrow.BinaryTypes.String},
))

// bundleRow is a finding with its history.
type bundleRow struct {
	f apitypes.Finding
	h []apitypes.HistoryEntry
}

func bundleColumns() []column[bundleRow] {
	cols := make([]column[bundleRow], 0, len(findingExport)+2)
	for _, c := range findingExport {
		cols = append(cols, column[bundleRow]{
			field:  c.field,
			append: func(b array.Builder, r *bundleRow) { c.append(b, &r.f) },
		})
	}
	cols = append(cols, strCol("recommended_action", func(r *bundleRow) string { return recommend(r.f).Summary }))
	cols = append(cols, column[bundleRow]{
		field: arrow.Field{Name: "history", Type: historyType},
		append: func(b array.Builder, r *bundleRow) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			for _, h := range r.h {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.Uint64Builder).Append(h.Version)
				for i, v := range []string{h.Transition, h.Classification, h.Severity, h.Status, h.Posture,
					h.ExpectedState, h.ObservedState, h.ObservedVersion} {
					sb.FieldBuilder(1 + i).(*array.StringBuilder).Append(v)
				}
				sb.FieldBuilder(9).(*array.Uint64Builder).Append(uint64(h.RetryCount))
				sb.FieldBuilder(10).(*array.TimestampBuilder).Append(arrow.Timestamp(h.At.Unix()))
				sb.FieldBuilder(11).(*array.StringBuilder).Append(h.CorrelationID)
			}
		},
	})
	return cols
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
	format, err := parseChoice(q, "format", "arrow", []string{"arrow", "parquet"})
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

	cols := bundleColumns()
	schema := schemaOf(cols)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, f := range findings {
		row := bundleRow{f: f, h: hist[f.EvidenceID]}
		for i, c := range cols {
			c.append(b.Field(i), &row)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	name := "evidence-bundle-" + s.opts.Now().UTC().Format("20060102T150405Z")
	w.Header().Set("Cache-Control", "no-store")
	if format == "parquet" {
		w.Header().Set("Content-Type", MediaParquet)
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.parquet"`)
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
		fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			return fmt.Errorf("parquet writer: %w", err)
		}
		werr := fw.Write(rec)
		return s.endExport(r, "bundle", fw.Close(), werr)
	}
	w.Header().Set("Content-Type", MediaArrowFile)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.arrow"`)
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
	if err != nil {
		return fmt.Errorf("arrow file writer: %w", err)
	}
	werr := fw.Write(rec)
	return s.endExport(r, "bundle", fw.Close(), werr)
}
