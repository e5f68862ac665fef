package joiner

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// snapshots adds to b a snapshot of the partitions that are due
// (CheckpointInterval or CheckpointEvents since their last checkpoint, or
// any that changed when final: the joiner is stopping, so that its
// successor replays nothing). b holds everything the partitions applied,
// so each snapshot is exactly the cut b commits. The member's lock is
// held.
//
// A snapshot is a copy of the partition's state (tens of megabytes for a
// partition of a million identities) held until its batch is committed
// and the checkpoint written, so their number is bounded: a seal takes at
// most Parallelism of them, the longest due first, less those still being
// written, and serialises them in parallel; the rest stay due for the
// next seals. The final seal only marks its partitions: they are
// serialised after the commit, Parallelism at a time (see save), while
// nothing is applied any more.
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
	start, writing := len(b.saves), 0
	for _, part := range j.parts {
		if part.saving.Load() {
			writing++
			continue
		}
		if part.events == part.cpEvents {
			continue
		}
		if !final && part.events-part.cpEvents < j.opts.CheckpointEvents && now.Sub(part.cpAt) < j.opts.CheckpointInterval {
			continue
		}
		b.saves = append(b.saves, save{part: part})
	}
	due := b.saves[start:]
	if n := max(j.opts.Parallelism-writing, 0); !final && len(due) > n {
		slices.SortFunc(due, func(a, b save) int { return a.part.cpAt.Compare(b.part.cpAt) })
		clear(due[n:])
		b.saves, due = b.saves[:start+n], due[:n]
	}
	for i := range due {
		part := due[i].part
		part.cpAt, part.cpEvents = now, part.events
		part.saving.Store(true)
		due[i].cut = j.cut(part.applied())
	}
	if final {
		return
	}
	j.eachSave(due, func(sv *save) { sv.blob = j.snapshot(sv.part) })
}

// eachSave calls fn with each of saves, Parallelism at a time.
func (j *Joiner) eachSave(saves []save, fn func(*save)) {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range min(max(j.opts.Parallelism, 1), len(saves)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(saves)); i = next.Add(1) - 1 {
				fn(&saves[i])
			}
		})
	}
	wg.Wait()
}

// snapshot serialises part's state, timed.
func (j *Joiner) snapshot(part *partition) []byte {
	t := time.Now()
	blob := part.snapshot()
	j.m.checkpointSnapshotSeconds.Observe(time.Since(t).Seconds())
	j.m.checkpointBytes.Set(float64(len(blob)))
	return blob
}

// save writes the snapshots of a committed batch in the background (a
// batch not committed drops them: its state is ahead of the cut). The
// partitions of a final batch, not serialised yet, are serialised and
// written here, Parallelism at a time, before save returns: the poll loop
// waits for the batch meanwhile, so their state is still the batch's cut.
func (j *Joiner) save(saves []save, committed bool) {
	var final []save
	for _, sv := range saves {
		switch {
		case !committed:
			sv.part.saving.Store(false)
		case sv.blob == nil:
			final = append(final, sv)
		default:
			j.saves.Add(1)
			go func(sv save) {
				defer j.saves.Done()
				j.write1(sv)
			}(sv)
		}
	}
	j.eachSave(final, func(sv *save) {
		sv.blob = j.snapshot(sv.part)
		j.write1(*sv)
		sv.blob = nil
	})
}

// write1 writes one checkpoint and marks its partition free for the next.
func (j *Joiner) write1(sv save) {
	defer sv.part.saving.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	if err := j.opts.Checkpoints.Save(ctx, j.opts.Group, sv.part.p, sv.cut, sv.blob); err != nil {
		j.m.checkpointErrors.Inc()
		j.opts.Logger.Warn("checkpoint not saved; the previous one stays in use", "partition", sv.part.p, "err", err)
		return
	}
	j.opts.Logger.Debug("checkpoint saved", "partition", sv.part.p, "cut", sv.cut.String(), "bytes", len(sv.blob))
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
