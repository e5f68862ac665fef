package nodeagent

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/driftline/driftline/internal/memstat"
	"github.com/driftline/driftline/pipeline/contract"
)

// base is the event time the package's own tests begin at.
var base = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// quietTracker returns a tracker with the default options whose rows go
// nowhere.
func quietTracker() *Tracker { return New(DefaultOptions(), func(*Status, *uint32) {}) }

func testBeat(node, host string) *contract.Heartbeat {
	return &contract.Heartbeat{NodeID: node, AgentVersion: "1.14.2", CertIssuerFingerprint: "sha256:" + fmt.Sprintf("%064x", 1),
		IngressTrustFingerprint: "sha256:" + fmt.Sprintf("%064x", 2), HostFingerprint: host, UpdatePath: "none",
		TerminalStreamProbe: "passed", WorkloadImpact: "none_observed", Health: "OK", RTTMs: 20, BandwidthKbps: 1e5}
}

// TestCompaction: a producer that sends a new fingerprint with every
// heartbeat does not grow the symbol table without bound, and no node
// loses its values when the table is rebuilt.
func TestCompaction(t *testing.T) {
	var last Status
	tr := New(DefaultOptions(), func(s *Status, _ *uint32) { last = *s })
	tr.ApplyRecord(&contract.PlatformRecord{Provider: contract.ProviderMAAS, ProviderID: "n1", RecordVersion: 1,
		ExpectedState: "allocated", ExpectedAgentVersion: "1.14.2", DomainID: "dom-1"}, base)
	for i := range 20000 {
		b := testBeat("n1", "sha256:h")
		b.CertIssuerFingerprint = fmt.Sprintf("sha256:%064x", i)
		tr.ApplyHeartbeat(b, base.Add(time.Duration(i)*time.Second), "")
	}
	if n := tr.syms.Len(); n > 2*minCompactAt {
		t.Fatalf("symbol table holds %d values", n)
	}
	if last.CertIssuerFingerprint != fmt.Sprintf("sha256:%064x", 19999) || last.DomainID != "dom-1" ||
		last.ExpectedAgentVersion != "1.14.2" || last.Health != "OK" || last.Gate != "pass" {
		t.Fatalf("after compaction: %+v", last)
	}
}

// TestBytesPerNode measures the heap the tracker holds per node with a
// record and a heartbeat (docs/node-agent-model.md, memory).
func TestBytesPerNode(t *testing.T) {
	const n = 100000
	ids := make([]string, n)
	hosts := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("gpu-eu-west-%06d", i)
		hosts[i] = fmt.Sprintf("sha256:%064x", i)
	}
	rec := &contract.PlatformRecord{Provider: contract.ProviderMAAS, RecordVersion: 1, ExpectedState: "allocated",
		ExpectedAgentVersion: "1.14.2", DomainID: "dom-1", OwningDomain: "gpuaas",
		CertIssuerFingerprint: "sha256:" + fmt.Sprintf("%064x", 1), IngressTrustFingerprint: "sha256:" + fmt.Sprintf("%064x", 2)}
	b := testBeat("", "")
	before := memstat.Live()
	tr := quietTracker()
	for i := range n {
		rec.ProviderID = ids[i]
		tr.ApplyRecord(rec, base)
		b.NodeID, b.HostFingerprint = ids[i], hosts[i]
		tr.ApplyHeartbeat(b, base.Add(time.Second), "")
	}
	after := memstat.Live()
	per := float64(after-before) / n
	t.Logf("%.0f bytes per node (node struct %d bytes)", per, nodeSize)
	if per > 512 {
		t.Fatalf("%.0f bytes per node", per)
	}
	runtime.KeepAlive(tr)
	runtime.KeepAlive(ids)
	runtime.KeepAlive(hosts)
}

const nodeSize = int(unsafeSizeofNode)

const unsafeSizeofNode = unsafe.Sizeof(node{})
