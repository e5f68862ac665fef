package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/cputime"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
)

// benchBatch returns a batch of n findings (each a current row and a
// history row) and n node statuses, with the fleet's mix of repeating
// and unique values.
func benchBatch(n int) *Batch {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	b := &Batch{}
	for i := range n {
		f := drift.Finding{EvidenceID: fmt.Sprintf("ev-%016x", i), CorrelationID: fmt.Sprintf("scan-%d", i/5000),
			ResourceFamily: "gpu", ProductID: fmt.Sprintf("gpu-a%d", i%7), OwningDomain: fmt.Sprintf("dom-%d", i%54),
			OwningPackage: "pkg-standard", DomainID: fmt.Sprintf("d-%d", i%54), RecordType: "allocation",
			RecordID: fmt.Sprintf("alloc-%d", i), ExpectedState: "running", ExpectedVersion: fmt.Sprintf("v%d", i%13),
			Provider: "maas", ProviderID: fmt.Sprintf("node-%d", i), ObservedState: "stopped", ObservedVersion: "v1",
			ObservedAt: at, Class: drift.Class(1 + i%6), Severity: "warning", Status: "open", FirstSeenAt: at.Add(-time.Hour),
			LastSeenAt: at, RetryCount: uint32(i % 3), Posture: "retry", NextAttemptAt: at.Add(time.Minute),
			Runbook: "rb/stale-lifecycle-state", AttentionScore: float64(i % 100), Version: uint64(i), Transition: contract.TransitionOpened}
		b.Current.Append(&f)
		tr := TransitionOf(&f)
		b.History.Append(&tr)
	}
	for i := range n {
		b.Nodes.Append(&nodeagent.Status{NodeID: fmt.Sprintf("node-%d", i), DomainID: fmt.Sprintf("d-%d", i%54),
			OwningDomain: fmt.Sprintf("dom-%d", i%54), State: "healthy", Reason: "ok", UpdatePath: "managed",
			ExpectedAgentVersion: "1.4.2", ObservedAgentVersion: "1.4.2", CertIssuerFingerprint: "sha256:ab12",
			IngressTrustFingerprint: "sha256:cd34", HostFingerprint: fmt.Sprintf("host-%d", i), TerminalStreamProbe: "ok",
			WorkloadImpact: "none", Health: "ok", Gate: "open", ConnectivityMode: "direct", RTTMs: 12, LastSeenAt: at,
			Version: uint64(i)})
	}
	return b
}

// BenchmarkWrite writes batches of 10,000 findings and node statuses
// (30,000 rows in three tables, and their materialized copies) to a real
// ClickHouse; ns/op is one Write, the client's encoding and the server's
// insert together, and cpu-ns/row the client's own CPU time per row (the
// joiner's share of a write, without the server's).
//
//	go test -run '^$' -bench Write -benchtime 20x ./pipeline/sink
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	batch := benchBatch(10000)
	c := NewClickHouse(readModel(b))
	b.ReportAllocs()
	cpu := cputime.Now()
	for b.Loop() {
		if err := c.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	rows := float64(b.N * 3 * batch.Current.Len())
	b.ReportMetric(float64(cputime.Now()-cpu)/rows, "cpu-ns/row")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/row")
}

// withSummaries adds to b what a joiner's batch also holds: counts of
// the groups its findings changed, an attention top and the progress of
// eight partitions.
func withSummaries(b *Batch) *Batch {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range 500 {
		b.Counts = append(b.Counts, Count{Partition: int32(i % 8), Key: CountKey{OwningDomain: fmt.Sprintf("dom-%d", i%54),
			Classification: drift.Class(1 + i%6).String(), Severity: "warning", Status: "open", Posture: "retry",
			ProductID: fmt.Sprintf("gpu-a%d", i%7), ResourceFamily: "gpu", Provider: "maas", DomainID: fmt.Sprintf("d-%d", i%54)},
			Findings: uint64(i), Version: uint64(i)})
	}
	for i := range 100 {
		b.Top = append(b.Top, TopSlot{Partition: int32(i % 8), Rank: uint16(i), ID: fmt.Sprintf("ev-%016x", i),
			Score: float64(100 - i), Version: uint64(i)})
	}
	for p := range 8 {
		b.Progress = append(b.Progress, Progress{Consumer: "bench", Partition: int32(p), Watermark: at, Events: 1000, FindingsOpen: 10})
	}
	return b
}

// BenchmarkWriteSmall is the latency of a small write, a joiner's last
// rounds of a catch-up or a quiet stream: 1,000 findings, transitions and
// node rows with the summaries and progress, where each insert's fixed
// cost on the server (a new part) weighs most. ns/op is one Write.
//
//	go test -run '^$' -bench WriteSmall -benchtime 50x -count 3 ./pipeline/sink
func BenchmarkWriteSmall(b *testing.B) {
	ctx := context.Background()
	batch := withSummaries(benchBatch(1000))
	c := NewClickHouse(readModel(b))
	for b.Loop() {
		if err := c.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}
