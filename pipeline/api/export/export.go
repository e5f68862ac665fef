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

func ptr(t time.Time) *time.Time { return &t }

// FindingColumns are the exported columns of a finding, in contract order.
var FindingColumns = []Column[apitypes.Finding]{
	strCol("evidence_id", func(f *apitypes.Finding) string { return f.EvidenceID }),
	strCol("correlation_id", func(f *apitypes.Finding) string { return f.CorrelationID }),
	strCol("resource_family", func(f *apitypes.Finding) string { return f.ResourceFamily }),
	strCol("product_id", func(f *apitypes.Finding) string { return f.ProductID }),
	strCol("owning_domain", func(f *apitypes.Finding) string { return f.OwningDomain }),
	strCol("owning_package", func(f *apitypes.Finding) string { return f.OwningPackage }),
	strCol("domain_id", func(f *apitypes.Finding) string { return f.DomainID }),
	strCol("record_type", func(f *apitypes.Finding) string { return f.RecordType }),
	strCol("record_id", func(f *apitypes.Finding) string { return f.RecordID }),
	strCol("expected_state", func(f *apitypes.Finding) string { return f.ExpectedState }),
	strCol("expected_version", func(f *apitypes.Finding) string { return f.ExpectedVersion }),
	strCol("provider", func(f *apitypes.Finding) string { return f.Provider }),
	strCol("provider_id", func(f *apitypes.Finding) string { return f.ProviderID }),
	strCol("observed_state", func(f *apitypes.Finding) string { return f.ObservedState }),
	strCol("observed_version", func(f *apitypes.Finding) string { return f.ObservedVersion }),
	timeCol("observed_at", func(f *apitypes.Finding) *time.Time { return f.ObservedAt }),
	strCol("classification", func(f *apitypes.Finding) string { return f.Classification }),
	strCol("severity", func(f *apitypes.Finding) string { return f.Severity }),
	strCol("status", func(f *apitypes.Finding) string { return f.Status }),
	timeCol("first_seen_at", func(f *apitypes.Finding) *time.Time { return ptr(f.FirstSeenAt) }),
	timeCol("last_seen_at", func(f *apitypes.Finding) *time.Time { return ptr(f.LastSeenAt) }),
	timeCol("resolved_at", func(f *apitypes.Finding) *time.Time { return f.ResolvedAt }),
	u64Col("retry_count", func(f *apitypes.Finding) uint64 { return uint64(f.RetryCount) }),
	strCol("posture", func(f *apitypes.Finding) string { return f.Posture }),
	timeCol("next_attempt_at", func(f *apitypes.Finding) *time.Time { return f.NextAttemptAt }),
	strCol("runbook", func(f *apitypes.Finding) string { return f.Runbook }),
	f64Col("attention_score", func(f *apitypes.Finding) float64 { return f.AttentionScore }),
	u64Col("version", func(f *apitypes.Finding) uint64 { return f.Version }),
}

// MismatchColumns are the exported columns of a billing mismatch. Amounts
// stay decimal strings: exact, and as the contract writes them.
var MismatchColumns = []Column[apitypes.BillingMismatch]{
	strCol("mismatch_id", func(m *apitypes.BillingMismatch) string { return m.MismatchID }),
	strCol("kind", func(m *apitypes.BillingMismatch) string { return m.Kind }),
	strCol("usage_id", func(m *apitypes.BillingMismatch) string { return m.UsageID }),
	strCol("metering_source", func(m *apitypes.BillingMismatch) string { return m.MeteringSource }),
	strCol("metering_id", func(m *apitypes.BillingMismatch) string { return m.MeteringID }),
	strCol("tenant_id", func(m *apitypes.BillingMismatch) string { return m.TenantID }),
	strCol("product_id", func(m *apitypes.BillingMismatch) string { return m.ProductID }),
	strCol("unit_id", func(m *apitypes.BillingMismatch) string { return m.UnitID }),
	strCol("quantity", func(m *apitypes.BillingMismatch) string { return m.Quantity }),
	strCol("conflict_quantity", func(m *apitypes.BillingMismatch) string { return m.ConflictQuantity }),
	strCol("rated_amount", func(m *apitypes.BillingMismatch) string { return m.RatedAmount }),
	strCol("ledger_amount", func(m *apitypes.BillingMismatch) string { return m.LedgerAmount }),
	strCol("amount_at_risk", func(m *apitypes.BillingMismatch) string { return m.AmountAtRisk }),
	strCol("currency", func(m *apitypes.BillingMismatch) string { return m.Currency }),
	strCol("status", func(m *apitypes.BillingMismatch) string { return m.Status }),
	timeCol("first_seen_at", func(m *apitypes.BillingMismatch) *time.Time { return ptr(m.FirstSeenAt) }),
	timeCol("last_seen_at", func(m *apitypes.BillingMismatch) *time.Time { return ptr(m.LastSeenAt) }),
	u64Col("version", func(m *apitypes.BillingMismatch) uint64 { return m.Version }),
}

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
