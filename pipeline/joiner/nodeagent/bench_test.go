package nodeagent_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
)

// BenchmarkApplyHeartbeat applies heartbeats round-robin to 10,000 nodes,
// 30 s of event time apart per node, advancing the watermark after each as
// the joiner does. changing varies the link figures so rows are emitted
// at every Refresh; cloned alternates two hosts per node.
func BenchmarkApplyHeartbeat(b *testing.B) {
	for _, bc := range []struct {
		name             string
		changing, cloned bool
	}{{"steady", false, false}, {"changing", true, false}, {"cloned", false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			const nodes = 10000
			rows := 0
			tr := nodeagent.New(nodeagent.DefaultOptions(), func(*nodeagent.Status, *uint32) { rows++ })
			beats := make([]contract.Heartbeat, nodes)
			clones := make([]string, nodes)
			for i := range beats {
				id := fmt.Sprintf("gpu-eu-west-%05d", i)
				tr.ApplyRecord(&contract.PlatformRecord{Provider: contract.ProviderMAAS, ProviderID: id, RecordVersion: 1,
					ExpectedState: "allocated", ExpectedAgentVersion: "1.14.2", DomainID: "dom-1", OwningDomain: "gpuaas",
					CertIssuerFingerprint: "sha256:c1", IngressTrustFingerprint: "sha256:i1"}, t0)
				beats[i] = contract.Heartbeat{NodeID: id, AgentVersion: "1.14.2", CertIssuerFingerprint: "sha256:c1",
					IngressTrustFingerprint: "sha256:i1", HostFingerprint: fmt.Sprintf("sha256:%064x", i), UpdatePath: "none",
					TerminalStreamProbe: "passed", WorkloadImpact: "none_observed", Health: "OK", RTTMs: 20, BandwidthKbps: 1e5}
				clones[i] = fmt.Sprintf("sha256:%064x", nodes+i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := i % nodes
				h := &beats[k]
				if bc.changing {
					h.RTTMs = float64(10 + i%50)
				}
				if bc.cloned && (i/nodes)%2 == 1 {
					h.HostFingerprint, clones[k] = clones[k], h.HostFingerprint
				}
				now := t0.Add(time.Duration(i/nodes)*30*time.Second + time.Duration(k)*time.Microsecond)
				tr.ApplyHeartbeat(h, now, "")
				tr.Advance(now.Add(-30 * time.Second))
			}
			b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
		})
	}
}
