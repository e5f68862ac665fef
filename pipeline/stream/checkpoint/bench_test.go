package checkpoint

import (
	"testing"

	"github.com/driftline/driftline/internal/testenv"
)

// The 100 MB benchmarks run against the in-process broker (kfake), which
// keeps every saved byte in memory: run them with -benchtime 3x or so.

const benchBlob = 100 << 20

func BenchmarkSave100MB(b *testing.B) {
	brokers, _ := testenv.Kafka(b, testPartitions)
	s := newStore(b, brokers, func(o *Options) { o.ChunkBytes = DefaultChunkBytes })
	blob := randomBlob(1, benchBlob)
	ctx := testCtx(b)
	b.SetBytes(benchBlob)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.Save(ctx, "g", 0, cut(int64(i), 0, 0), blob); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad100MB(b *testing.B) {
	brokers, _ := testenv.Kafka(b, testPartitions)
	s := newStore(b, brokers, func(o *Options) { o.ChunkBytes = DefaultChunkBytes })
	ctx := testCtx(b)
	if err := s.Save(ctx, "g", 0, cut(1, 1, 1), randomBlob(1, benchBlob)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchBlob)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cp, ok, err := s.Load(ctx, "g", 0, cut(1, 1, 1))
		if err != nil || !ok || len(cp.Blob) != benchBlob {
			b.Fatalf("load: ok=%v err=%v", ok, err)
		}
	}
}
