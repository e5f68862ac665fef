package sink

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
)

// columns returns s with only its node_agent_status columns: what a
// NodeRows keeps of it.
func columns(s nodeagent.Status) nodeagent.Status {
	out := s
	out.HostFingerprints, out.ExpectedCertIssuerFingerprint, out.ExpectedIngressTrustFingerprint = 0, "", ""
	out.IdentityMismatch, out.IdentityReason, out.AuthorityConflict, out.SupplyChainViolation = false, "", false, false
	out.CorrelationID, out.At = "", time.Time{}
	return out
}

// TestNodeRowsKeepEveryColumn appends and overwrites rows of random
// statuses, whose strings and lists share their bytes as the tracker's
// interned ones do, and reads every row back: each holds the columns of
// the status last written to it.
func TestNodeRowsKeepEveryColumn(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	shared := []string{"healthy", "degraded", "1.4.2", "1.5.0", "dom-1", "dom-2", "ACTIVE", "sha256:ab12"}
	lists := [][]string{nil, {"gpu", "h100"}, {"gpu"}, {"ctl-1", "ctl-2"}}
	topics := []string{"platform.records", "provider.observations", "nodeagent.telemetry"}
	value := func(i int) string {
		switch r.IntN(4) {
		case 0:
			return ""
		case 1:
			return fmt.Sprintf("v-%d", i) // a new value
		default:
			v := shared[r.IntN(len(shared))]
			if r.IntN(8) == 0 {
				return v[:len(v)-1] // the same address, another length
			}
			return v
		}
	}
	status := func(i int) nodeagent.Status {
		s := nodeagent.Status{NodeID: fmt.Sprintf("node-%d", r.IntN(50)), RTTMs: r.Float64(), LossPct: float64(i),
			BandwidthKbps: 3, BacklogMessages: int64(i), SecondsBehind: -int64(i), ReplayRequired: r.IntN(2) == 0,
			AttentionScore: 17, Version: uint64(i), Transitions: uint64(r.IntN(9)), UptimeS: int64(i * 7),
			Tags: lists[r.IntN(len(lists))], ControllerIDs: lists[r.IntN(len(lists))],
			Recent: nodeagent.RecentOf(nodeagent.Ring{}, topics, int32(r.IntN(2))),
			CorrelationID: "not a column", HostFingerprints: 2, At: time.Unix(5, 0)}
		if r.IntN(3) > 0 {
			s.LastSeenAt = time.Unix(1_700_000_000+int64(i), 123).UTC()
		}
		if r.IntN(3) == 0 {
			s.PhaseSince = time.Unix(1_600_000_000, 0).UTC()
		}
		for k, field := range nodeStrings {
			if k != nsNodeID {
				*field(&s) = value(i)
			}
		}
		return s
	}
	var rows NodeRows
	for round := range 5 {
		rows.Reset()
		at := map[string]int{}
		want := []nodeagent.Status{}
		for i := range 2_000 {
			s := status(i)
			if k, ok := at[s.NodeID]; ok {
				rows.Set(k, &s)
				want[k] = columns(s)
				continue
			}
			at[s.NodeID] = rows.Append(&s)
			want = append(want, columns(s))
		}
		got := rows.Statuses()
		if len(got) != len(want) {
			t.Fatalf("round %d: %d rows, want %d", round, len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("round %d, row %d:\n got %+v\nwant %+v", round, i, got[i], want[i])
			}
		}
	}
}

// TestNodeRowsCopyAValueOnce: a value many rows share is copied once per
// batch, and a row overwritten with unchanged strings copies nothing; a
// value whose bytes changed at the same address is copied again.
func TestNodeRowsCopyAValueOnce(t *testing.T) {
	var rows NodeRows
	fp, tags := "sha256:"+string(make([]byte, 64)), []string{"gpu", "h100"}
	for i := range 100 {
		rows.Append(&nodeagent.Status{NodeID: fmt.Sprintf("n%03d", i), CertIssuerFingerprint: fp, Tags: tags})
	}
	// 100 ids of 4 bytes, the fingerprint and the list once.
	if want := 100*4 + len(fp) + 1 + 3 + 1 + 4; len(rows.bytes) != want {
		t.Fatalf("%d bytes of strings, want %d", len(rows.bytes), want)
	}
	before := len(rows.bytes)
	s := rows.Status(7)
	rows.Set(7, &s)
	if len(rows.bytes) != before {
		t.Fatalf("an unchanged row copied %d bytes", len(rows.bytes)-before)
	}
	buf := []byte("value-1")
	v := unsafe.String(&buf[0], len(buf))
	rows.Append(&nodeagent.Status{NodeID: v})
	buf[6] = '2' // the same address now holds another value
	rows.Append(&nodeagent.Status{NodeID: v})
	if a, b := rows.Status(100).NodeID, rows.Status(101).NodeID; a != "value-1" || b != "value-2" {
		t.Fatalf("rows hold %q and %q", a, b)
	}
}

// TestNodeRowSize keeps a packed row small and free of pointers, which
// is what it is for.
func TestNodeRowSize(t *testing.T) {
	if n := unsafe.Sizeof(nodeRow{}); n > 440 {
		t.Errorf("a packed node row is %d bytes", n)
	}
	if typ := reflect.TypeFor[nodeRow](); hasPointers(typ) {
		t.Errorf("a packed node row holds pointers")
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
