package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Save stores blob as the checkpoint of partition of group, taken at cut.
// It returns once every chunk and then the manifest are acknowledged by
// the brokers (acks=all): from then on Load can return it. A Save that
// fails or is interrupted leaves chunks without a manifest, which Load
// ignores. blob must not change until Save returns (its chunks are sent
// without a copy). Call Save only after the offsets of cut are committed:
// Load trusts a checkpoint once the committed offsets reach its cut.
func (s *Store) Save(ctx context.Context, group string, partition int32, cut Cut, blob []byte) (err error) {
	start := time.Now()
	defer func() {
		if err != nil {
			s.m.saves.WithLabelValues("error").Inc()
			return
		}
		s.m.saves.WithLabelValues("ok").Inc()
		s.m.savedBytes.Add(float64(len(blob)))
		s.m.saveSeconds.Observe(time.Since(start).Seconds())
	}()
	if err := s.checkPartition("save", partition); err != nil {
		return err
	}
	if group == "" {
		return fmt.Errorf("checkpoint save: empty group")
	}
	if err := cut.validate(); err != nil {
		return fmt.Errorf("checkpoint save %s/%d: %w", group, partition, err)
	}
	prev, ok := s.known(group, partition)
	if !ok {
		// First save of this partition by this store: find the slot the
		// newest checkpoint uses, so that this one does not overwrite it.
		m, err := s.scan(ctx, group, partition, nil)
		if err != nil {
			return err
		}
		if m != nil {
			prev = slotState{slot: m.Slot, chunks: m.Chunks, other: m.Other}
		} else {
			prev = slotState{slot: slotB} // so this one goes to slot a
		}
	}
	m := &manifest{
		Version:   manifestVersion,
		ID:        newID(),
		Group:     group,
		Partition: partition,
		Slot:      otherSlot(prev.slot),
		Cut:       cut.Clone(),
		Size:      int64(len(blob)),
		XXH64:     xxhash.Sum64(blob),
		ChunkSize: s.opts.ChunkBytes,
		Chunks:    (len(blob) + s.opts.ChunkBytes - 1) / s.opts.ChunkBytes,
		First:     -1,
		Last:      -1,
		Other:     prev.chunks,
	}
	if err := s.writeChunks(ctx, m, blob); err != nil {
		return err
	}
	m.Written = time.Now().UTC()
	value, err := json.Marshal(m)
	if err != nil {
		panic("BUG: encode manifest: " + err.Error())
	}
	rec := &kgo.Record{
		Key:       manifestKey(group, partition, m.Slot),
		Value:     value,
		Partition: partition,
		Headers:   []kgo.RecordHeader{{Key: kindHeader, Value: []byte(kindManifest)}, {Key: idHeader, Value: []byte(m.ID)}},
	}
	if err := s.prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return &PartitionError{Op: "save manifest", Topic: s.opts.Topic, Partition: partition, Offset: -1, Err: err}
	}
	m.offset = rec.Offset
	s.remember(group, partition, m)
	// The slot held a bigger checkpoint before: drop its extra chunk keys
	// from a compacted topic. Best effort: they are harmless, only space.
	if extra := prev.other - m.Chunks; extra > 0 {
		tomb := make([]*kgo.Record, 0, extra)
		for i := m.Chunks; i < prev.other; i++ {
			tomb = append(tomb, &kgo.Record{
				Key:       chunkKey(group, partition, m.Slot, i),
				Partition: partition,
				Headers:   []kgo.RecordHeader{{Key: kindHeader, Value: []byte(kindTombstone)}},
			})
		}
		if err := s.prod.ProduceSync(ctx, tomb...).FirstErr(); err != nil {
			s.opts.Logger.Warn("checkpoint: tombstones for superseded chunks not written", "topic", s.opts.Topic, "partition", partition, "group", group, "err", err)
		} else {
			s.m.tombstones.Add(float64(extra))
		}
	}
	return nil
}

// writeChunks produces the chunks of blob and records their offsets in m.
func (s *Store) writeChunks(ctx context.Context, m *manifest, blob []byte) error {
	if m.Chunks == 0 {
		return nil
	}
	offsets := make([]int64, m.Chunks)
	var (
		mu       sync.Mutex // protects firstErr
		firstErr error
		wg       sync.WaitGroup
	)
	id := []byte(m.ID)
	kind := []byte(kindChunk)
	for i := 0; i < m.Chunks; i++ {
		lo := i * m.ChunkSize
		hi := min(lo+m.ChunkSize, len(blob))
		rec := &kgo.Record{
			Key:       chunkKey(m.Group, m.Partition, m.Slot, i),
			Value:     blob[lo:hi:hi],
			Partition: m.Partition,
			Headers: []kgo.RecordHeader{
				{Key: kindHeader, Value: kind},
				{Key: idHeader, Value: id},
				{Key: indexHeader, Value: []byte(strconv.Itoa(i))},
			},
		}
		wg.Add(1)
		s.prod.Produce(ctx, rec, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("chunk %d of %d: %w", i, m.Chunks, err)
				}
				mu.Unlock()
				return
			}
			offsets[i] = r.Offset
		})
	}
	wg.Wait()
	if firstErr != nil {
		return &PartitionError{Op: "save", Topic: s.opts.Topic, Partition: m.Partition, Offset: -1,
			Err: fmt.Errorf("%w; Possible solutions: if the broker rejects the size, lower ChunkBytes below the topic's max.message.bytes", firstErr)}
	}
	// The chunks are found by id and index, not order: an idempotent
	// producer keeps them in order, but the range is all Load needs.
	m.First, m.Last = offsets[0], offsets[0]
	for _, o := range offsets[1:] {
		m.First, m.Last = min(m.First, o), max(m.Last, o)
	}
	return nil
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}
