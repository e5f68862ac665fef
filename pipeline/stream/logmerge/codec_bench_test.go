package logmerge

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
)

// fleetBatches returns n record sets of about 1 MiB each, as a fetched
// batch holds them before its codec: a generated fleet's events in Kafka's
// v2 record format, with the gateway's three headers.
func fleetBatches(b *testing.B, n int) [][]byte {
	b.Helper()
	cfg := fleet.DefaultConfig()
	cfg.Domains, cfg.NodesPerDomain, cfg.AppsPerDomain, cfg.VolumesPerDomain, cfg.EndpointsPerDomain = 8, 500, 1000, 700, 250
	g, err := fleet.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	headers := []kmsg.Header{
		{Key: contract.HeaderActorID, Value: []byte("SYSTEM::gateway")},
		{Key: contract.HeaderSourceType, Value: []byte("SYSTEM")},
		{Key: contract.HeaderPolicyRev, Value: []byte("3f9a1c2e")},
	}
	errEnough := errors.New("enough")
	var (
		out [][]byte
		cur []byte
		i   int32
	)
	err = g.Emit(func(ev *fleet.Event) error {
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: i, Key: ev.Key, Value: ev.Line, Headers: headers}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a one-byte varint length at first
		cur = r.AppendTo(cur)
		i++
		if len(cur) >= 1<<20 {
			out, cur, i = append(out, cur), nil, 0
			if len(out) == n {
				return errEnough
			}
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		b.Fatalf("the fleet gave %d batches of %d: %v", len(out), n, err)
	}
	return out
}

// BenchmarkDecompress is the consumer's cost of the producers' codec: what
// kgo's decompressor takes per fetched batch of the joiner's records
// (MB/s of decompressed records; compressed/raw is the ratio). snappy is
// kgo's default and the producers' here (ingest gateway, bench harness).
func BenchmarkDecompress(b *testing.B) {
	raw := fleetBatches(b, 32)
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
		typ   kgo.CompressionCodecType
	}{
		{"snappy", kgo.SnappyCompression(), kgo.CodecSnappy},
		{"lz4", kgo.Lz4Compression(), kgo.CodecLz4},
		{"zstd", kgo.ZstdCompression(), kgo.CodecZstd},
	} {
		comp, err := kgo.DefaultCompressor(c.codec)
		if err != nil {
			b.Fatal(err)
		}
		var (
			enc             [][]byte
			rawLen, compLen int
		)
		for _, r := range raw {
			e, typ := comp.Compress(new(bytes.Buffer), r)
			if typ != c.typ {
				b.Fatalf("%s: compressed as codec %d", c.name, typ)
			}
			enc = append(enc, bytes.Clone(e))
			rawLen, compLen = rawLen+len(r), compLen+len(e)
		}
		dec := kgo.DefaultDecompressor()
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(rawLen))
			for b.Loop() {
				for i, e := range enc {
					d, err := dec.Decompress(e, c.typ)
					if err != nil || len(d) != len(raw[i]) {
						b.Fatalf("batch %d: %d bytes, want %d: %v", i, len(d), len(raw[i]), err)
					}
				}
			}
			b.ReportMetric(float64(compLen)/float64(rawLen), "compressed/raw")
		})
	}
}
