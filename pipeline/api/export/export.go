// Package export encodes the query API's listings for bulk readers:
// Apache Arrow IPC streams and CSV written row by row as ClickHouse
// returns them, and evidence bundles as one Arrow IPC file or Parquet
// file. A failed export never looks complete: the Arrow stream lacks its
// end marker and the CSV ends with an "#error" line.
package export

import (
	"encoding/csv"
	"net/http"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// Media types of the export formats.
const (
	MediaArrowStream = "application/vnd.apache.arrow.stream"
	MediaArrowFile   = "application/vnd.apache.arrow.file"
	MediaCSV         = "text/csv"
	MediaParquet     = "application/vnd.apache.parquet"
)

// Export formats of the listings (JSON is the API's own).
const (
	CSV   = "csv"
	Arrow = "arrow"
)

// arrowBatchRows is the number of rows per Arrow record batch: large
// enough to amortise the IPC framing, small enough that a client sees the
// first rows early and the server holds only one batch.
const arrowBatchRows = 8192

// Column is one exported column of rows of type T: its Arrow field, how to
// append a row's value to an Arrow builder, and its CSV text.
type Column[T any] struct {
	field  arrow.Field
	append func(b array.Builder, row *T)
	text   func(row *T) string
}

func strCol[T any](name string, get func(*T) string) Column[T] {
	return Column[T]{
		field:  arrow.Field{Name: name, Type: arrow.BinaryTypes.String},
		append: func(b array.Builder, r *T) { b.(*array.StringBuilder).Append(get(r)) },
		text:   get,
	}
}

var tsType = &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}

// timeCol exports a time; nil is null in Arrow and empty in CSV.
func timeCol[T any](name string, get func(*T) *time.Time) Column[T] {
	return Column[T]{
		field: arrow.Field{Name: name, Type: tsType, Nullable: true},
		append: func(b array.Builder, r *T) {
			if t := get(r); t != nil {
				b.(*array.TimestampBuilder).Append(arrow.Timestamp(t.Unix()))
			} else {
				b.AppendNull()
			}
		},
		text: func(r *T) string {
			if t := get(r); t != nil {
				return t.UTC().Format(time.RFC3339)
			}
			return ""
		},
	}
}

func u64Col[T any](name string, get func(*T) uint64) Column[T] {
	return Column[T]{
		field:  arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64},
		append: func(b array.Builder, r *T) { b.(*array.Uint64Builder).Append(get(r)) },
		text:   func(r *T) string { return strconv.FormatUint(get(r), 10) },
	}
}

func f64Col[T any](name string, get func(*T) float64) Column[T] {
	return Column[T]{
		field:  arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64},
		append: func(b array.Builder, r *T) { b.(*array.Float64Builder).Append(get(r)) },
		text:   func(r *T) string { return strconv.FormatFloat(get(r), 'g', -1, 64) },
	}
}

// FindingColumns are the exported columns of a finding, in contract order.
var FindingColumns = columnsOf[apitypes.Finding](
	"evidence_id", "correlation_id", "resource_family", "product_id", "owning_domain", "owning_package",
	"domain_id", "record_type", "record_id", "expected_state", "expected_version", "provider",
	"provider_id", "observed_state", "observed_version", "observed_at", "classification", "severity",
	"status", "first_seen_at", "last_seen_at", "resolved_at", "retry_count", "posture",
	"next_attempt_at", "runbook", "attention_score", "version",
)

// MismatchColumns are the exported columns of a billing mismatch. Amounts
// stay decimal strings: exact, and as the contract writes them.
var MismatchColumns = columnsOf[apitypes.BillingMismatch](
	"mismatch_id", "kind", "usage_id", "metering_source", "metering_id", "tenant_id", "product_id",
	"unit_id", "quantity", "conflict_quantity", "rated_amount", "ledger_amount", "amount_at_risk",
	"currency", "status", "first_seen_at", "last_seen_at", "version",
)

func schemaOf[T any](cols []Column[T]) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.field
	}
	return arrow.NewSchema(fields, nil)
}

// RowWriter writes rows of T in one export format as they are read.
type RowWriter[T any] interface {
	Write(row *T) error
	// Close ends the answer; after an error it ends it so that the client
	// sees a broken stream rather than a complete one.
	Close(failed bool) error
}

// NewRowWriter starts an export answer in format (CSV or Arrow) named
// name: headers now, rows as they come.
func NewRowWriter[T any](w http.ResponseWriter, format, name string, cols []Column[T]) RowWriter[T] {
	w.Header().Set("Cache-Control", "no-store")
	switch format {
	case CSV:
		w.Header().Set("Content-Type", MediaCSV+"; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.csv"`)
		w.WriteHeader(http.StatusOK)
		cw := &csvRows[T]{w: csv.NewWriter(w), cols: cols, flusher: flusherOf(w)}
		head := make([]string, len(cols))
		for i, c := range cols {
			head[i] = c.field.Name
		}
		_ = cw.w.Write(head)
		return cw
	case Arrow:
		w.Header().Set("Content-Type", MediaArrowStream)
		w.WriteHeader(http.StatusOK)
		schema := schemaOf(cols)
		return &arrowRows[T]{
			w:       ipc.NewWriter(w, ipc.WithSchema(schema)),
			b:       array.NewRecordBuilder(memory.DefaultAllocator, schema),
			cols:    cols,
			flusher: flusherOf(w),
		}
	}
	panic("BUG: export.NewRowWriter: format " + format)
}

func flusherOf(w http.ResponseWriter) func() {
	return func() { _ = http.NewResponseController(w).Flush() }
}

type csvRows[T any] struct {
	w       *csv.Writer
	cols    []Column[T]
	rec     []string
	n       int
	flusher func()
}

func (c *csvRows[T]) Write(row *T) error {
	c.rec = c.rec[:0]
	for _, col := range c.cols {
		c.rec = append(c.rec, col.text(row))
	}
	if err := c.w.Write(c.rec); err != nil {
		return err
	}
	if c.n++; c.n%arrowBatchRows == 0 {
		c.w.Flush()
		c.flusher()
	}
	return c.w.Error()
}

func (c *csvRows[T]) Close(failed bool) error {
	if failed {
		// A trailing line a CSV reader cannot mistake for data.
		_ = c.w.Write([]string{"#error: export cut short; see the server log"})
	}
	c.w.Flush()
	return c.w.Error()
}

type arrowRows[T any] struct {
	w       *ipc.Writer
	b       *array.RecordBuilder
	cols    []Column[T]
	n       int
	flusher func()
}

func (a *arrowRows[T]) Write(row *T) error {
	for i, c := range a.cols {
		c.append(a.b.Field(i), row)
	}
	if a.n++; a.n == arrowBatchRows {
		return a.flush()
	}
	return nil
}

func (a *arrowRows[T]) flush() error {
	rec := a.b.NewRecordBatch()
	defer rec.Release()
	a.n = 0
	if err := a.w.Write(rec); err != nil {
		return err
	}
	a.flusher()
	return nil
}

func (a *arrowRows[T]) Close(failed bool) error {
	defer a.b.Release()
	if failed {
		// Without the end-of-stream marker a reader reports a truncated
		// stream instead of a short, complete-looking one.
		return nil
	}
	if a.n > 0 {
		if err := a.flush(); err != nil {
			return err
		}
	}
	return a.w.Close()
}
