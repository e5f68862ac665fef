package checkpoint

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record layout. Every record of the topic carries the header kindHeader:
//
//   - a chunk: key "<group>/<partition>/<slot>/<index>", value one slice of
//     the blob, header idHeader (the checkpoint's id) and indexHeader;
//   - a manifest, written after every chunk was acknowledged: key
//     "<group>/<partition>/<slot>/m", value the JSON manifest;
//   - a tombstone: a chunk key with a null value, written when a
//     checkpoint has fewer chunks than the one its slot held before, so a
//     compacted topic drops the superseded chunks.
//
// Keys are parsed from the right (partition, slot and part hold no '/'),
// so a group name may contain '/'. Readers use the headers and the
// manifest, never the key: keys exist for compaction.
const (
	kindHeader  = "driftline.checkpoint"
	idHeader    = "driftline.checkpoint.id"
	indexHeader = "driftline.checkpoint.index"

	kindChunk     = "chunk"
	kindManifest  = "manifest"
	kindTombstone = "tombstone"

	manifestVersion = 1

	// maxChunkBytes bounds ChunkSize: Options.ChunkBytes is at most this.
	maxChunkBytes = 64 << 20
)

// Slots: a (group, partition) alternates its checkpoints between two key
// slots, so that on a compacted topic a new checkpoint, torn or whole,
// never overwrites the keys of the newest whole one.
const (
	slotA = "a"
	slotB = "b"
)

func otherSlot(s string) string {
	if s == slotA {
		return slotB
	}
	return slotA
}

func chunkKey(group string, partition int32, slot string, index int) []byte {
	return []byte(group + "/" + strconv.Itoa(int(partition)) + "/" + slot + "/" + strconv.Itoa(index))
}

func manifestKey(group string, partition int32, slot string) []byte {
	return []byte(group + "/" + strconv.Itoa(int(partition)) + "/" + slot + "/m")
}

// manifest describes one whole checkpoint. It is the record that makes a
// checkpoint exist: it is written only once every chunk is acknowledged,
// and names the offsets of its chunks and the hash of the blob.
type manifest struct {
	Version   int       `json:"v"`
	ID        string    `json:"id"`
	Group     string    `json:"group"`
	Partition int32     `json:"partition"`
	Slot      string    `json:"slot"`
	Cut       Cut       `json:"cut"`
	Size      int64     `json:"size"`        // blob bytes
	XXH64     uint64    `json:"xxh64"`       // xxhash64 of the blob
	ChunkSize int       `json:"chunk_bytes"` // bytes of every chunk but the last
	Chunks    int       `json:"chunks"`
	First     int64     `json:"first"` // offset of chunk 0; -1 with no chunks
	Last      int64     `json:"last"`  // offset of the last chunk; -1 with no chunks
	Other     int       `json:"other"` // chunks of the other slot's newest checkpoint, as the writer knew it
	Written   time.Time `json:"written"`

	offset int64 // of the manifest record itself
}

// contiguous reports whether the chunks fill [First, Last] with nothing
// else in between: then a scan for older manifests can jump over them.
func (m *manifest) contiguous() bool {
	return m.Chunks > 0 && m.Last-m.First+1 == int64(m.Chunks)
}

// chunkLen is the length of chunk i.
func (m *manifest) chunkLen(i int) int {
	if i < m.Chunks-1 {
		return m.ChunkSize
	}
	return int(m.Size - int64(m.Chunks-1)*int64(m.ChunkSize))
}

func (m *manifest) check() error {
	switch {
	case m.Version != manifestVersion:
		return fmt.Errorf("manifest version %d, want %d", m.Version, manifestVersion)
	case m.ID == "" || (m.Slot != slotA && m.Slot != slotB):
		return fmt.Errorf("manifest without id or slot")
	case m.Cut.validate() != nil:
		return fmt.Errorf("manifest cut: %w", m.Cut.validate())
	case m.Size < 0 || m.Chunks < 0 || m.ChunkSize < 1 || m.ChunkSize > maxChunkBytes:
		return fmt.Errorf("manifest sizes %d/%d/%d", m.Size, m.Chunks, m.ChunkSize)
	case m.Chunks == 0 && m.Size != 0:
		return fmt.Errorf("manifest of %d bytes without chunks", m.Size)
	case m.Chunks > 0 && (m.Size > int64(m.Chunks)*int64(m.ChunkSize) || m.Size <= int64(m.Chunks-1)*int64(m.ChunkSize)):
		return fmt.Errorf("manifest size %d does not fit %d chunks of %d", m.Size, m.Chunks, m.ChunkSize)
	case m.Chunks > 0 && (m.First < 0 || m.Last < m.First || m.Last >= m.offset):
		return fmt.Errorf("manifest chunk offsets [%d, %d] not before the manifest", m.First, m.Last)
	case int64(m.Chunks) > m.Last-m.First+1:
		// Each chunk is a record of its own in [First, Last]; a count
		// beyond that is damage, and would size the loader's buffers.
		return fmt.Errorf("manifest of %d chunks in offsets [%d, %d]", m.Chunks, m.First, m.Last)
	}
	return nil
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func decodeManifest(r *kgo.Record) (*manifest, error) {
	m := new(manifest)
	if err := json.Unmarshal(r.Value, m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	m.offset = r.Offset
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}
