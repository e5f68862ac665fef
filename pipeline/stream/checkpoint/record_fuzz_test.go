package checkpoint

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzDecodeManifest feeds arbitrary manifest records, as read back from
// the topic, to decodeManifest: no panic, and a manifest it accepts is one
// the loader can use as it stands: its chunks fit inside the offsets
// before the manifest, each chunk length is within 1..ChunkSize, and the
// lengths add up to Size.
func FuzzDecodeManifest(f *testing.F) {
	for _, m := range []*manifest{
		{Version: manifestVersion, ID: "id-1", Group: "g", Partition: 3, Slot: slotA, Cut: cut(10, 20, 30),
			Size: 10_000, XXH64: 42, ChunkSize: 4096, Chunks: 3, First: 7, Last: 11, Other: 2, Written: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)},
		{Version: manifestVersion, ID: "id-2", Group: "g/with/slashes", Slot: slotB, Cut: cut(0, 0, 0), ChunkSize: 1, First: -1, Last: -1},
	} {
		v, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v, int64(12))
	}
	f.Add([]byte(`{"v":1,"id":"x","slot":"a","cut":{"t":1},"size":1,"chunk_bytes":1,"chunks":1,"first":0,"last":0}`), int64(0))
	f.Fuzz(func(t *testing.T, value []byte, offset int64) {
		m, err := decodeManifest(&kgo.Record{Value: value, Offset: offset})
		if err != nil {
			return
		}
		if m.offset != offset {
			t.Fatalf("manifest offset %d, record offset %d", m.offset, offset)
		}
		if m.Chunks == 0 {
			if m.Size != 0 {
				t.Fatalf("%d bytes without chunks", m.Size)
			}
			return
		}
		if m.First < 0 || m.Last >= offset || int64(m.Chunks) > m.Last-m.First+1 {
			t.Fatalf("%d chunks in offsets [%d, %d] before the manifest at %d", m.Chunks, m.First, m.Last, offset)
		}
		if m.ChunkSize > maxChunkBytes {
			t.Fatalf("chunk size %d above %d", m.ChunkSize, maxChunkBytes)
		}
		last := m.chunkLen(m.Chunks - 1)
		if last < 1 || last > m.ChunkSize || (m.Chunks > 1 && m.chunkLen(0) != m.ChunkSize) {
			t.Fatalf("chunk lengths %d (first) and %d (last) of %d", m.chunkLen(0), last, m.ChunkSize)
		}
		if int64(m.Chunks-1)*int64(m.ChunkSize)+int64(last) != m.Size {
			t.Fatalf("chunks of %d bytes, last %d, do not add up to %d", m.ChunkSize, last, m.Size)
		}
	})
}
