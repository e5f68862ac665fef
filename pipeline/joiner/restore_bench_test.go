package joiner

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/checkpoint"
)

// bigPartition returns a partition that tracks n identities, each with a
// platform record and an agreeing observation (the steady state), built
// through the engine directly.
func bigPartition(b *testing.B, n int) (*Joiner, *partition) {
	j, part := benchJoiner(b)
	part.out.emit = false
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	rec := contract.PlatformRecord{RecordType: "gpu_allocation", RecordVersion: 1, ResourceFamily: contract.FamilyGPUaaS,
		ProductID: "gpu-h100", OwningDomain: "gpuaas", OwningPackage: "gpu-scheduler", DomainID: "eu-west",
		Provider: contract.ProviderMAAS, ExpectedState: "allocated", ExpectedVersion: "img-2026.11"}
	obs := contract.Observation{Provider: contract.ProviderMAAS, ResourceFamily: contract.FamilyGPUaaS, ObservedState: "allocated", ObservedVersion: "img-2026.11"}
	for i := range n {
		node := "gpu-eu-west-" + strconv.Itoa(1000000+i)
		rec.ProviderID, rec.RecordID = node, "alloc-"+node
		obs.ProviderID, obs.OwnerRef = node, rec.RecordID
		at := start.Add(time.Duration(i) * time.Microsecond)
		part.engine.ApplyRecord(&rec, at, "sync-1")
		part.engine.ApplyObservation(&obs, at.Add(time.Millisecond), "scan-1")
		part.dedupe.Observe("maas-scanner-eu1", true, uint64(i+1), "", at, uint64(i)*0x9e3779b97f4a7c15+1)
		part.events += 2
	}
	return j, part
}

// BenchmarkRestore1M measures what a joiner does when it is assigned a
// partition tracking 1,000,000 identities: load the newest checkpoint
// from the broker (the test broker, in process) and rebuild the state
// from it. The tail after the checkpoint's cut (at most one
// checkpoint interval of records) is replayed on top; the hot-path
// benchmark gives its cost per event. bench/joiner/README.md records the
// figures.
func BenchmarkRestore1M(b *testing.B) {
	const n = 1_000_000
	j, part := bigPartition(b, n)
	blob := part.snapshot()

	brokers, _ := testenv.Kafka(b, 1)
	store, err := checkpoint.New(context.Background(), checkpoint.Options{Brokers: brokers, Partitions: 1, Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cut := j.cut([numStreams]int64{n, n, 0})
	if err := store.Save(context.Background(), "bench", 0, cut, blob); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		cp, ok, err := store.Load(context.Background(), "bench", 0, cut)
		if err != nil || !ok {
			b.Fatalf("load: %v %v", ok, err)
		}
		restored := j.newPartition(0, part.out)
		if err := restored.loadSnapshot(cp.Blob); err != nil {
			b.Fatal(err)
		}
		if restored.engine.Store().Len() != n {
			b.Fatalf("restored %d identities", restored.engine.Store().Len())
		}
	}
	b.ReportMetric(float64(len(blob))/n, "snapshot-B/identity")
}

// BenchmarkSnapshot1M measures serialising a partition of 1,000,000
// identities (the poll loop waits for it once per checkpoint interval)
// and rebuilding it from the bytes, without the broker.
func BenchmarkSnapshot1M(b *testing.B) {
	const n = 1_000_000
	j, part := bigPartition(b, n)
	b.Run("save", func(b *testing.B) {
		for range b.N {
			_ = part.snapshot()
		}
	})
	blob := part.snapshot()
	b.Run("load", func(b *testing.B) {
		for range b.N {
			if err := j.newPartition(0, part.out).loadSnapshot(blob); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSnapshotFirst is the first snapshot of a partition (no previous
// one to size its buffer after), as the final checkpoint of a joiner
// stopping soon after its start takes: BenchmarkSnapshot1M/save is every
// later one.
func BenchmarkSnapshotFirst(b *testing.B) {
	_, part := bigPartition(b, 1_000_000)
	b.ResetTimer()
	for range b.N {
		part.snapSize = 0
		_ = part.snapshot()
	}
}
