package ingest

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
)

// benchBody is a request of n observation lines with distinct ids.
func benchBody(b *testing.B, n int) []byte {
	var buf bytes.Buffer
	for i := range n {
		fmt.Fprintf(&buf, `{"event_id":"bench-%06d","event_type":"provider.observation","schema_version":1,"producer":"scanner-1","occurred_at":"2026-11-21T10:15:30.123Z","correlation_id":"scan-1","environment":"local_parity","payload":{"provider":"maas","provider_id":"node-%d","resource_family":"gpuaas_allocation","observed_state":"active","observed_version":"v7","usage":"12.500000"}}`+"\n", i, i%500)
	}
	return buf.Bytes()
}

// BenchmarkPrepare measures the per-request CPU work before the broker:
// split, validate, authorise, dedupe check, build records. One op is one
// request of 1,000 events.
func BenchmarkPrepare(b *testing.B) {
	g := offlineGateway(b)
	pol := g.pol.Load()
	p, err := pol.keys.Authenticate("k")
	if err != nil {
		b.Fatal(err)
	}
	body := benchBody(b, 1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		bt := g.prepare(pol, p, body)
		if len(bt.lines) != 1000 || bt.lines[999].receipt.Status != StatusAccepted {
			b.Fatalf("%+v", bt.lines[999].receipt)
		}
		if _, _, err := g.records(context.Background(), bt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecentSet measures the memory of the gateway's recent set per
// remembered identity, full at DefaultDedupeCapacity, beside the same
// identities in a set without digests (a map to struct{}): what keeping
// each identity's content digest costs. One op fills a set.
func BenchmarkRecentSet(b *testing.B) {
	const n = DefaultDedupeCapacity
	ids := make([]recent, n)
	for i := range ids {
		ids[i] = recent{id: fmt.Sprintf("9:scanner-1/s/%d", 1_000_000+i), digest: contract.Digest(i)}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var withDigest, without float64
	for b.Loop() {
		base := heap()
		s := newRecentSet(n)
		s.add(ids...)
		withDigest = float64(heap()-base) / n
		runtime.KeepAlive(s)
		base = heap()
		m := make(map[string]struct{}, n)
		ring := make([]string, n)
		for i, r := range ids {
			m[r.id] = struct{}{}
			ring[i] = r.id
		}
		without = float64(heap()-base) / n
		runtime.KeepAlive(m)
		runtime.KeepAlive(ring)
	}
	b.ReportMetric(withDigest, "heapB/id")
	b.ReportMetric(without, "heapB/id-without-digest")
}
