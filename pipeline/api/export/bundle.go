package export

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
)

// Bundle formats.
const (
	BundleArrow   = "arrow" // one Arrow IPC file
	BundleParquet = "parquet"
)

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

// BundleRow is one finding of an evidence bundle, with its history and
// recommended action.
type BundleRow struct {
	Finding apitypes.Finding
	History []apitypes.HistoryEntry
	Action  string // summary of the recommended action
}

func bundleColumns() []Column[BundleRow] {
	cols := make([]Column[BundleRow], 0, len(FindingColumns)+2)
	for _, c := range FindingColumns {
		cols = append(cols, Column[BundleRow]{
			field:  c.field,
			append: func(b array.Builder, r *BundleRow) { c.append(b, &r.Finding) },
		})
	}
	cols = append(cols, strCol("recommended_action", func(r *BundleRow) string { return r.Action }))
	cols = append(cols, Column[BundleRow]{
		field: arrow.Field{Name: "history", Type: historyType},
		append: func(b array.Builder, r *BundleRow) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			for _, h := range r.History {
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

// BundleWriter writes one evidence bundle: one row per finding, its
// history as a list of structs.
type BundleWriter struct {
	cols  []Column[BundleRow]
	write func(arrow.RecordBatch) error
	close func() error
}

// NewBundleWriter starts a bundle answer in format (BundleArrow or
// BundleParquet) on w, as an attachment named name with the format's
// extension. An error means nothing was written.
func NewBundleWriter(w http.ResponseWriter, format, name string) (*BundleWriter, error) {
	cols := bundleColumns()
	schema := schemaOf(cols)
	w.Header().Set("Cache-Control", "no-store")
	if format == BundleParquet {
		w.Header().Set("Content-Type", MediaParquet)
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.parquet"`)
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
		fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			return nil, fmt.Errorf("parquet writer: %w", err)
		}
		return &BundleWriter{cols: cols, write: fw.Write, close: fw.Close}, nil
	}
	w.Header().Set("Content-Type", MediaArrowFile)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.arrow"`)
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
	if err != nil {
		return nil, fmt.Errorf("arrow file writer: %w", err)
	}
	return &BundleWriter{cols: cols, write: fw.Write, close: fw.Close}, nil
}

// Write writes rows as one record batch.
func (bw *BundleWriter) Write(rows []BundleRow) error {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemaOf(bw.cols))
	defer b.Release()
	for i := range rows {
		for j, c := range bw.cols {
			c.append(b.Field(j), &rows[i])
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return bw.write(rec)
}

// Close ends the file.
func (bw *BundleWriter) Close() error { return bw.close() }
