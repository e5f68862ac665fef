package export

import (
	"strings"
	"testing"
	"time"
)

// TestColumnsOf pins how a field's Go type becomes its column: the Arrow
// type and the CSV text, an embedded struct's fields promoted, a nil time
// null in Arrow and empty in CSV.
func TestColumnsOf(t *testing.T) {
	type inner struct {
		N uint32 `json:"n"`
	}
	type row struct {
		S  string     `json:"s,omitempty"`
		F  float64    `json:"f"`
		I  int64      `json:"i"`
		At time.Time  `json:"at"`
		P  *time.Time `json:"p"`
		inner
	}
	cols := columnsOf[row]("n", "s", "f", "i", "at", "p")
	r := row{S: "x", F: 0.5, I: -3, At: time.Date(2026, 11, 21, 12, 0, 0, 0, time.FixedZone("CET", 3600)), inner: inner{N: 7}}
	var got []string
	for _, c := range cols {
		got = append(got, c.field.Name+":"+c.field.Type.String()+"="+c.text(&r))
	}
	want := "n:uint64=7 s:utf8=x f:float64=0.5 i:int64=-3 at:timestamp[s, tz=UTC]=2026-11-21T11:00:00Z p:timestamp[s, tz=UTC]="
	if s := strings.Join(got, " "); s != want {
		t.Errorf("columns:\n%s\nwant\n%s", s, want)
	}
	for i, c := range cols {
		if c.field.Nullable != (i >= 4) {
			t.Errorf("%s: nullable %t; times are nullable, other columns not", c.field.Name, c.field.Nullable)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("an unknown name did not panic")
		}
	}()
	columnsOf[row]("missing")
}
