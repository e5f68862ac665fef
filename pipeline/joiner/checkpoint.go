package joiner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftline/driftline/pipeline/stream/checkpoint"
)

// saveTimeout bounds one checkpoint write; a write that fails is retried
// at the next interval (the previous checkpoint stays valid meanwhile).
const saveTimeout = 30 * time.Second

// errIgnoredCheckpoint is why a restore skips a checkpoint written before
// Options.IgnoreCheckpointsBefore.
var errIgnoredCheckpoint = errors.New("checkpoint ignored (-joiner.ignoreCheckpointsBefore)")

// applied returns, per stream, the offset after the last record applied
// to part: its state includes exactly the records below.
func (part *partition) applied() [numStreams]int64 {
	var at [numStreams]int64
	for s := range numStreams {
		at[s] = max(part.merge.Next[s].Offset, part.merge.Committed[s])
	}
	return at
}

// cut returns offsets as a checkpoint cut over the joined topics.
func (j *Joiner) cut(offsets [numStreams]int64) checkpoint.Cut {
	names := j.streamTopics()
	c := make(checkpoint.Cut, numStreams)
	for s, t := range names {
		c[t] = offsets[s]
	}
	return c
}

// save is a checkpoint taken at a seal, saved once its batch is committed.
type save struct {
	part *partition
	cut  checkpoint.Cut
	blob []byte
}

// snapshots adds to b a snapshot of each partition that is due
// (CheckpointInterval or CheckpointEvents since its last checkpoint, or
// any that changed when final: the joiner is stopping, so that its
// successor replays nothing). b holds everything the partitions applied,
// so each snapshot is exactly the cut b commits; the partitions are
// serialised in parallel. The member's lock is held.
func (j *Joiner) snapshots(b *batch, final bool) {
	if j.opts.Checkpoints == nil {
		return
	}
	if final {
		// A checkpoint still being written would make this one skip its
		// partition, and the successor replay from the older one.
		j.saves.Wait()
	}
	now := time.Now()
	start := len(b.saves)
	for _, part := range j.parts {
		if part.saving.Load() || part.events == part.cpEvents {
			continue
		}
		if !final && part.events-part.cpEvents < j.opts.CheckpointEvents && now.Sub(part.cpAt) < j.opts.CheckpointInterval {
			continue
		}
		part.cpAt, part.cpEvents = now, part.events
		part.saving.Store(true)
		b.saves = append(b.saves, save{part: part, cut: j.cut(part.applied())})
	}
	due := b.saves[start:]
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range min(max(j.opts.Parallelism, 1), len(due)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(due)); i = next.Add(1) - 1 {
				t := time.Now()
				due[i].blob = due[i].part.snapshot()
				j.m.checkpointSnapshotSeconds.Observe(time.Since(t).Seconds())
				j.m.checkpointBytes.Set(float64(len(due[i].blob)))
			}
		})
	}
	wg.Wait()
}

// save writes the snapshots of a committed batch in the background (a
// batch not committed drops them: its state is ahead of the cut).
func (j *Joiner) save(saves []save, committed bool) {
	for _, sv := range saves {
		if !committed {
			sv.part.saving.Store(false)
			continue
		}
		j.saves.Add(1)
		go func(sv save) {
			defer j.saves.Done()
			defer sv.part.saving.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
			defer cancel()
			if err := j.opts.Checkpoints.Save(ctx, j.opts.Group, sv.part.p, sv.cut, sv.blob); err != nil {
				j.m.checkpointErrors.Inc()
				j.opts.Logger.Warn("checkpoint not saved; the previous one stays in use", "partition", sv.part.p, "err", err)
				return
			}
			j.opts.Logger.Debug("checkpoint saved", "partition", sv.part.p, "cut", sv.cut.String(), "bytes", len(sv.blob))
		}(sv)
	}
}

// fromCheckpoint loads the newest checkpoint of partition p at or before
// targets that this joiner can decode into a new partition: one it cannot
// (a snapshot version of a newer release, after a rollback) is counted
// and an older one is tried. ok is false when there is none: the caller
// replays from the start.
func (j *Joiner) fromCheckpoint(ctx context.Context, p int32, targets [numStreams]int64, out *output) (part *partition, from [numStreams]int64, ok bool) {
	if j.opts.Checkpoints == nil {
		return nil, from, false
	}
	cp, found, err := j.opts.Checkpoints.LoadUsable(ctx, j.opts.Group, p, j.cut(targets), func(cp checkpoint.Checkpoint) error {
		if before := j.opts.IgnoreCheckpointsBefore; !before.IsZero() && cp.Written.Before(before) {
			return fmt.Errorf("%w: written %s, before %s", errIgnoredCheckpoint, cp.Written.UTC().Format(time.RFC3339), before.UTC().Format(time.RFC3339))
		}
		part = j.newPartition(p, out)
		if err := part.loadSnapshot(cp.Blob); err != nil {
			j.m.checkpointErrors.Inc()
			return err
		}
		return nil
	})
	if err != nil {
		j.opts.Logger.Warn("checkpoint not loaded; replaying the partition from its start", "partition", p, "err", err)
		return nil, from, false
	}
	if !found {
		return nil, from, false
	}
	for s, t := range j.streamTopics() {
		from[s] = cp.Cut[t]
	}
	part.cpAt, part.cpEvents = time.Now(), part.events
	j.m.restoreCheckpoints.Inc()
	j.opts.Logger.Info("partition state loaded from checkpoint", "partition", p, "checkpoint", cp.ID, "cut", cp.Cut.String(), "bytes", len(cp.Blob), "written", cp.Written)
	return part, from, true
}
