package nodeagent

import (
	"fmt"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// TestSnapshotCompactsSymbols checks that a restored tracker's symbol
// table holds only the values its nodes hold.
func TestSnapshotCompactsSymbols(t *testing.T) {
	tr := quietTracker()
	for i := range 1000 {
		tr.ApplyHeartbeat(&contract.Heartbeat{NodeID: "n1", HostFingerprint: "h1", AgentVersion: fmt.Sprintf("1.0.%d", i),
			Health: "OK"}, base.Add(time.Duration(i)*time.Second), "")
	}
	var w snap.Writer
	tr.AppendSnapshot(&w)
	r := quietTracker()
	if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	if tr.syms.Len() < 1000 || r.syms.Len() > int(numFixedSyms)+2 {
		t.Fatalf("symbols: %d before, %d restored", tr.syms.Len(), r.syms.Len())
	}
	var s Status
	if !r.Lookup("n1", &s) || s.ObservedAgentVersion != "1.0.999" {
		t.Fatalf("restored status %+v", s)
	}
}

// FuzzLoadSnapshot checks that no input makes LoadSnapshot, or the
// tracker it restores, panic.
func FuzzLoadSnapshot(f *testing.F) {
	tr := quietTracker()
	for i := range 20 {
		id := fmt.Sprintf("n%d", i%5)
		tr.ApplyRecord(&contract.PlatformRecord{Provider: contract.ProviderMAAS, ProviderID: id, RecordVersion: int64(i),
			ExpectedAgentVersion: "1.0.1", CertIssuerFingerprint: "c1"}, base)
		tr.ApplyHeartbeat(&contract.Heartbeat{NodeID: id, HostFingerprint: fmt.Sprintf("h%d", i%3), AgentVersion: "1.0.1",
			CertIssuerFingerprint: "c1", Health: "OK"}, base.Add(time.Duration(i)*time.Minute), "corr")
		tr.Advance(base.Add(time.Duration(i) * time.Minute))
	}
	var w snap.Writer
	tr.AppendSnapshot(&w)
	f.Add(w.B)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := quietTracker()
		if r.LoadSnapshot(snap.NewReader(b)) != nil {
			return
		}
		r.ApplyHeartbeat(&contract.Heartbeat{NodeID: "n1", HostFingerprint: "h9", Health: "OK"}, base.Add(time.Hour), "")
		r.ApplyRecord(&contract.PlatformRecord{Provider: contract.ProviderMAAS, ProviderID: "n2", RecordVersion: 99}, base.Add(time.Hour))
		r.Advance(base.Add(2 * time.Hour))
		var w snap.Writer
		r.AppendSnapshot(&w)
	})
}
