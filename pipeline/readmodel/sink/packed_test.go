package sink

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// randomRows returns a function filling every field of a row (the
// unexported ones too, such as a node status's ring of recent events)
// with a random value: strings new or shared (as interned values share
// their bytes, some cut short at the same address), lists shared, times
// zero or not, numbers.
func randomRows(r *rand.Rand) func(v reflect.Value, i int) {
	shared := []string{"healthy", "degraded", "1.4.2", "1.5.0", "dom-1", "dom-2", "ACTIVE", "sha256:ab12"}
	lists := [][]string{nil, {"gpu", "h100"}, {"gpu"}, {"ctl-1", "ctl-2"}, {""}}
	var fill func(v reflect.Value, i int)
	fill = func(v reflect.Value, i int) {
		switch {
		case v.Type() == timeType:
			if r.IntN(3) > 0 {
				v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(r.IntN(1e6)), int64(r.IntN(1e9))).UTC()))
			} else {
				v.Set(reflect.ValueOf(time.Time{}))
			}
		case v.Kind() == reflect.String:
			switch r.IntN(4) {
			case 0:
				v.SetString("")
			case 1:
				v.SetString(fmt.Sprintf("v-%d-%d", i, r.IntN(1000)))
			default:
				s := shared[r.IntN(len(shared))]
				if r.IntN(8) == 0 {
					s = s[:len(s)-1]
				}
				v.SetString(s)
			}
		case v.Kind() == reflect.Slice:
			v.Set(reflect.ValueOf(lists[r.IntN(len(lists))]))
		case v.Kind() == reflect.Struct:
			for k := range v.NumField() {
				f := v.Field(k)
				fill(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), i)
			}
		case v.Kind() == reflect.Array:
			for k := range v.Len() {
				fill(v.Index(k), i)
			}
		case v.CanInt():
			v.SetInt(r.Int64N(1<<40) - 1<<39)
		case v.CanUint():
			v.SetUint(r.Uint64() >> (64 - 8*v.Type().Size()))
		case v.CanFloat():
			v.SetFloat(r.NormFloat64())
		case v.Kind() == reflect.Bool:
			v.SetBool(r.IntN(2) == 0)
		}
	}
	return fill
}

// checkPacked appends and overwrites random rows of type R, keyed by
// key, in five batches, and reads every row back: each holds the value
// last written to it, field for field.
func checkPacked[R any](t *testing.T, seed uint64, key func(*R) *string) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	fill := randomRows(r)
	var p Packed[R]
	for batch := range 5 {
		p.Reset()
		at := map[string]int{}
		var want []R
		for i := range 2_000 {
			var v R
			fill(reflect.ValueOf(&v).Elem(), i)
			*key(&v) = fmt.Sprintf("key-%d", r.IntN(400))
			if k, ok := at[*key(&v)]; ok {
				p.Set(k, &v)
				want[k] = v
				continue
			}
			at[*key(&v)] = p.Append(&v)
			want = append(want, v)
		}
		got := p.All()
		if len(got) != len(want) || p.Len() != len(want) {
			t.Fatalf("batch %d: %d rows (Len %d), want %d", batch, len(got), p.Len(), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("batch %d, row %d:\n got %+v\nwant %+v", batch, i, got[i], want[i])
			}
			if row := p.Row(i); !reflect.DeepEqual(row, want[i]) {
				t.Fatalf("batch %d, Row(%d):\n got %+v\nwant %+v", batch, i, row, want[i])
			}
		}
	}
}

// TestPackedKeepsEveryField packs the four kinds of rows a batch holds.
func TestPackedKeepsEveryField(t *testing.T) {
	t.Run("node status", func(t *testing.T) {
		checkPacked(t, 1, func(s *nodeagent.Status) *string { return &s.NodeID })
	})
	t.Run("finding", func(t *testing.T) {
		checkPacked(t, 2, func(f *drift.Finding) *string { return &f.EvidenceID })
	})
	t.Run("transition", func(t *testing.T) {
		checkPacked(t, 3, func(tr *Transition) *string { return &tr.EvidenceID })
	})
	t.Run("lifecycle transition", func(t *testing.T) {
		checkPacked(t, 4, func(tr *nodeagent.Transition) *string { return &tr.NodeID })
	})
}

// TestBlocksUnpackEveryBatch: the rows of several batches come back in
// order, in blocks of at most readmodel.BlockRows, their lists whole.
func TestBlocksUnpackEveryBatch(t *testing.T) {
	tags := []string{"gpu", "h100"}
	var want []drift.Finding
	bs := []*Batch{{}, {}, {}}
	for i, n := range []int{readmodel.BlockRows + 5, 0, 3} {
		for k := range n {
			f := drift.Finding{EvidenceID: fmt.Sprintf("ev-%d-%d", i, k), Version: uint64(k), Tags: tags[:k%3]}
			if k%3 == 0 {
				f.Tags = nil
			}
			bs[i].Current.Append(&f)
			want = append(want, f)
		}
	}
	var got []drift.Finding
	for block := range Blocks(bs, func(b *Batch) *Packed[drift.Finding] { return &b.Current }) {
		if len(block) != 1 || len(block[0]) > readmodel.BlockRows {
			t.Fatalf("a block of %d parts, %d rows", len(block), len(block[0]))
		}
		for _, f := range block[0] {
			f.Tags = append([]string(nil), f.Tags...) // the block's lists are reused
			if len(f.Tags) == 0 {
				f.Tags = nil
			}
			got = append(got, f)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%d rows unpacked, want %d (or they differ)", len(got), len(want))
	}
	// A few rows (a live round's) take a buffer of their size, not a
	// block's.
	few := []*Batch{{Current: PackedOf(want[:3]...)}}
	for block := range Blocks(few, func(b *Batch) *Packed[drift.Finding] { return &b.Current }) {
		if len(block[0]) != 3 || cap(block[0]) != 3 {
			t.Fatalf("3 rows unpacked into a block of %d, a buffer of %d", len(block[0]), cap(block[0]))
		}
	}
	for range Blocks([]*Batch{{}}, func(b *Batch) *Packed[drift.Finding] { return &b.Current }) {
		t.Fatal("no rows, a block")
	}
}

// TestPackedCopyAValueOnce: a value many rows share is copied about once
// per batch, and a row overwritten with unchanged strings copies nothing; a
// value whose bytes changed at the same address is copied again.
func TestPackedCopyAValueOnce(t *testing.T) {
	var p Packed[nodeagent.Status]
	fp, tags := "sha256:"+strings.Repeat("0", 64), []string{"gpu", "h100"}
	for i := range 100 {
		p.Append(&nodeagent.Status{NodeID: fmt.Sprintf("n%03d", i), CertIssuerFingerprint: fp, Tags: tags})
	}
	// 100 ids of 4 bytes after their length, the fingerprint and the list
	// once, or a few times when an id's cache entry evicted theirs: not
	// once a row (and the zero length at offset 0).
	shared := 1 + len(fp) + 1 + (1 + 3 + 1 + 4)
	if n := len(p.bytes) - 1 - 100*(1+4); n < shared || n > 3*shared {
		t.Fatalf("%d bytes of strings beside the ids, want %d to %d", n, shared, 3*shared)
	}
	before := len(p.bytes)
	s := p.Row(7)
	p.Set(7, &s)
	if len(p.bytes) != before {
		t.Fatalf("an unchanged row copied %d bytes", len(p.bytes)-before)
	}
	buf := []byte("value-1")
	v := unsafe.String(&buf[0], len(buf))
	p.Append(&nodeagent.Status{NodeID: v})
	buf[6] = '2' // the same address now holds another value
	p.Append(&nodeagent.Status{NodeID: v})
	if a, b := p.Row(100).NodeID, p.Row(101).NodeID; a != "value-1" || b != "value-2" {
		t.Fatalf("rows hold %q and %q", a, b)
	}
}

// TestPackedRowSizes keeps the packed rows small: what they are for.
func TestPackedRowSizes(t *testing.T) {
	for _, c := range []struct {
		typ      reflect.Type
		max, was uintptr
	}{
		{reflect.TypeFor[nodeagent.Status](), 352, unsafe.Sizeof(nodeagent.Status{})},
		{reflect.TypeFor[drift.Finding](), 196, unsafe.Sizeof(drift.Finding{})},
		{reflect.TypeFor[Transition](), 88, unsafe.Sizeof(Transition{})},
	} {
		if n := uintptr(4 * layoutOf(c.typ).slots); n > c.max {
			t.Errorf("a packed %s is %d bytes (a %s is %d)", c.typ, n, c.typ, c.was)
		}
	}
}

// TestPackedRefusesPointers: a row type with a field Packed cannot copy
// is a programming error, told on its first row.
func TestPackedRefusesPointers(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "cannot pack") {
			t.Fatalf("recovered %v", r)
		}
	}()
	var p Packed[struct{ P *int }]
	p.Append(&struct{ P *int }{})
}

// TestPackedResetKeepsItsCapacity: a batch refilled after Reset appends
// without allocating (a joiner's steady state).
func TestPackedResetKeepsItsCapacity(t *testing.T) {
	ids := make([]string, 3*packChunkRows+17)
	for i := range ids {
		ids[i] = fmt.Sprintf("ev-%d", i)
	}
	var p Packed[Transition]
	fill := func() {
		p.Reset()
		for i := range ids {
			p.Append(&Transition{EvidenceID: ids[i], Version: uint64(i), At: time.Unix(int64(i), 0)})
		}
	}
	fill()
	if allocs := testing.AllocsPerRun(3, fill); allocs != 0 {
		t.Fatalf("refilling allocates %.0f times", allocs)
	}
	if p.Len() != len(ids) || p.Row(len(ids)-1).EvidenceID != ids[len(ids)-1] || p.Row(5).Version != 5 {
		t.Fatalf("%d rows; the last %+v", p.Len(), p.Row(len(ids)-1))
	}
}

// BenchmarkPacked packs a round of node statuses (each node's row written
// once, then overwritten as its next heartbeat does) and unpacks them as
// the insert does; it reports the packed bytes per row.
func BenchmarkPacked(b *testing.B) {
	const nodes = 4096
	r := rand.New(rand.NewPCG(1, 2))
	fill := randomRows(r)
	rows := make([]nodeagent.Status, nodes)
	for i := range rows {
		fill(reflect.ValueOf(&rows[i]).Elem(), i)
	}
	var p Packed[nodeagent.Status]
	bs := []*Batch{{}}
	b.ReportAllocs()
	for b.Loop() {
		p.Reset()
		for i := range rows {
			p.Append(&rows[i])
		}
		for i := range rows {
			rows[i].LastSeenAt = rows[i].LastSeenAt.Add(time.Second)
			p.Set(i, &rows[i])
		}
		bs[0].Nodes = p
		for range Blocks(bs, func(b *Batch) *Packed[nodeagent.Status] { return &b.Nodes }) {
		}
	}
	b.ReportMetric(float64(len(p.chunks)*cap(p.chunks[0])*int(unsafe.Sizeof(p.chunks[0][0]))+len(p.bytes))/nodes, "B/row")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/row")
}
