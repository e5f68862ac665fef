package joiner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/checkpoint"
)

// countingStore is a Checkpoints that keeps the blobs saved and the most
// Save calls it saw at once.
type countingStore struct {
	mu      sync.Mutex // mu protects the fields below
	saved   map[int32][]byte
	running int
	most    int
}

func (s *countingStore) Save(_ context.Context, _ string, p int32, _ checkpoint.Cut, blob []byte) error {
	s.mu.Lock()
	s.running++
	s.most = max(s.most, s.running)
	s.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // long enough for the other calls to overlap
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if s.saved == nil {
		s.saved = map[int32][]byte{}
	}
	s.saved[p] = blob
	return nil
}

func (s *countingStore) LoadUsable(context.Context, string, int32, checkpoint.Cut, func(checkpoint.Checkpoint) error) (checkpoint.Checkpoint, bool, error) {
	return checkpoint.Checkpoint{}, false, nil
}

// TestSnapshotsBounded: a seal snapshots at most Parallelism partitions,
// the longest due first and none still being written, and leaves the
// others due for the next seals; the final seal's partitions are
// serialised after the commit, Parallelism at a time, each restorable.
func TestSnapshotsBounded(t *testing.T) {
	j, _ := benchJoiner(t)
	store := &countingStore{}
	j.opts.Checkpoints, j.opts.Parallelism, j.opts.CheckpointInterval = store, 2, time.Nanosecond
	recs := benchEvents(40, 10, contract.DefaultTopics().PlatformRecords, t0)
	const parts = 5
	start := time.Now()
	for p := range int32(parts) {
		part := j.newPartition(p, nil)
		part.out = &part.live
		part.cpAt = start.Add(-time.Duration(parts-p) * time.Second) // partition 0 due longest
		for _, r := range recs {
			j.apply(part, r)
		}
		j.parts[p] = part
	}
	seal := func(final bool) *batch {
		b := &batch{}
		j.snapshots(b, final)
		return b
	}

	b := seal(false)
	if len(b.saves) != 2 || b.saves[0].part.p != 0 || b.saves[1].part.p != 1 {
		t.Fatalf("first seal snapshots %v, want partitions 0 and 1", savedParts(b))
	}
	for _, sv := range b.saves {
		if len(sv.blob) == 0 {
			t.Fatalf("partition %d: no snapshot taken at the seal", sv.part.p)
		}
	}
	if again := seal(false); len(again.saves) != 0 {
		t.Fatalf("a seal while two snapshots are held took %v more", savedParts(again))
	}
	j.save(b.saves, true)
	j.saves.Wait()
	if b2 := seal(false); len(b2.saves) != 2 || b2.saves[0].part.p != 2 || b2.saves[1].part.p != 3 {
		t.Fatalf("second seal snapshots %v, want partitions 2 and 3", savedParts(b2))
	} else {
		j.save(b2.saves, true)
		j.saves.Wait()
	}

	// The final seal marks every partition changed since its checkpoint
	// (0, 1 and 2 applied more, 4 has none) and serialises them only
	// after the commit.
	more := benchEvents(len(recs)+3, 10, contract.DefaultTopics().PlatformRecords, t0)[len(recs):]
	for p := range int32(3) {
		for _, r := range more {
			j.apply(j.parts[p], r)
		}
	}
	fin := seal(true)
	if got := savedParts(fin); len(got) != 4 {
		t.Fatalf("final seal marks %v, want partitions 0, 1, 2, 4", got)
	}
	for _, sv := range fin.saves {
		if sv.blob != nil {
			t.Fatalf("partition %d serialised at the final seal, before the commit", sv.part.p)
		}
	}
	store.most = 0
	j.save(fin.saves, true)
	if store.most > j.opts.Parallelism {
		t.Errorf("%d checkpoints written at once, want at most %d", store.most, j.opts.Parallelism)
	}
	if len(store.saved) != parts {
		t.Fatalf("checkpoints of %d partitions, want %d", len(store.saved), parts)
	}
	for p, blob := range store.saved {
		restored := j.newPartition(p, nil)
		if err := restored.loadSnapshot(blob); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		if restored.events != j.parts[p].events {
			t.Errorf("partition %d restored at %d events, applied %d", p, restored.events, j.parts[p].events)
		}
		if j.parts[p].saving.Load() {
			t.Errorf("partition %d still marked as saving", p)
		}
	}
}

func savedParts(b *batch) []int32 {
	var ps []int32
	for _, sv := range b.saves {
		ps = append(ps, sv.part.p)
	}
	return ps
}
