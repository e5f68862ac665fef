package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Checkpoint is a loaded checkpoint.
type Checkpoint struct {
	// Blob is the saved state.
	Blob []byte
	// Cut is the position in each stream the state covers: replay each
	// stream from its offset here up to the committed offset.
	Cut Cut
	// ID identifies the checkpoint (random, unique).
	ID string
	// Offset is the offset of its manifest in the checkpoint topic.
	Offset int64
	// Written is when its writer produced the manifest.
	Written time.Time
}

// Load returns the newest whole checkpoint of partition of group whose cut
// is at or before notAfter in every stream (Cut.NotAfter); pass the
// group's committed offsets, so that a checkpoint saved beyond them
// (offsets never committed) is not used. ok is false when there is none.
// Checkpoints whose chunks are missing or do not hash to their manifest
// are skipped (and counted), and an older one is tried.
//
// Load reads the partition backwards from its end, jumping over the
// chunks of checkpoints it passes, so it costs the size of the checkpoint
// it returns plus a record per newer manifest, not the partition's
// history.
func (s *Store) Load(ctx context.Context, group string, partition int32, notAfter Cut) (Checkpoint, bool, error) {
	return s.LoadUsable(ctx, group, partition, notAfter, nil)
}

// LoadUsable is Load for a consumer that may find a whole checkpoint
// unusable: one its version cannot decode (written by a newer release
// before a rollback), or one whose state fails its own checks. It calls
// use on each whole checkpoint that Load would return, newest first, and
// returns the first one use accepts (returns nil for); one use rejects
// is skipped (counted with reason unusable, and logged) and an older one
// is tried. A nil use accepts the first.
func (s *Store) LoadUsable(ctx context.Context, group string, partition int32, notAfter Cut, use func(Checkpoint) error) (cp Checkpoint, ok bool, err error) {
	start := time.Now()
	defer func() {
		switch {
		case err != nil:
			s.m.loads.WithLabelValues("error").Inc()
		case ok:
			s.m.loads.WithLabelValues("hit").Inc()
			s.m.loadedBytes.Add(float64(len(cp.Blob)))
		default:
			s.m.loads.WithLabelValues("miss").Inc()
		}
		s.m.loadSeconds.Observe(time.Since(start).Seconds())
	}()
	if err := s.checkPartition("load", partition); err != nil {
		return Checkpoint{}, false, err
	}
	var (
		blob []byte
		used *manifest
	)
	_, err = s.scan(ctx, group, partition, func(r *reader, m *manifest, window []*kgo.Record) (bool, error) {
		if !m.Cut.NotAfter(notAfter) {
			s.m.skipped.WithLabelValues("after_cut").Inc()
			return false, nil
		}
		b, err := s.assemble(ctx, r, m, window)
		if errors.Is(err, errDamaged) {
			s.m.skipped.WithLabelValues("damaged").Inc()
			s.opts.Logger.Warn("checkpoint: skipping a damaged checkpoint", "topic", s.opts.Topic, "partition", partition, "offset", m.offset, "group", group, "id", m.ID, "err", err)
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if use != nil {
			if err := use(Checkpoint{Blob: b, Cut: m.Cut, ID: m.ID, Offset: m.offset, Written: m.Written}); err != nil {
				s.m.skipped.WithLabelValues("unusable").Inc()
				s.opts.Logger.Warn("checkpoint: skipping a checkpoint its reader cannot use; trying an older one", "topic", s.opts.Topic, "partition", partition, "offset", m.offset, "group", group, "id", m.ID, "err", err)
				return false, nil
			}
		}
		blob, used = b, m
		return true, nil
	})
	if err != nil || used == nil {
		return Checkpoint{}, false, err
	}
	return Checkpoint{Blob: blob, Cut: used.Cut, ID: used.ID, Offset: used.offset, Written: used.Written}, true, nil
}

// Scan windows, in records: the first is small because the newest
// manifest is usually among the last records; the next one doubles while
// the records read are small (manifests, tombstones), so a scan that
// lands among chunks no manifest covers (a torn write) reads few of them
// at a time.
const (
	firstWindow    = 8
	maxWindow      = 1024
	growBelowBytes = 1 << 20
	// scanFetchBytes bounds one fetch of a scan window: a broker answers
	// up to this much from the requested offset on, whatever the window's
	// end, and the first batch whole however big, so it bounds what a
	// scan reads beyond its window.
	scanFetchBytes = 16 << 10
)

// scan walks the manifests of group's partition from the newest back. It
// remembers the newest one for Save, and returns it when use is nil. With
// use, it calls use on each (with the window of records read around it)
// until use reports done, and returns that manifest; nil when none is.
func (s *Store) scan(ctx context.Context, group string, partition int32, use func(*reader, *manifest, []*kgo.Record) (bool, error)) (*manifest, error) {
	r, err := s.newReader(ctx, partition)
	if err != nil {
		return nil, err
	}
	logStart, end, err := r.bounds(ctx)
	if err != nil {
		return nil, err
	}
	type span struct{ lo, hi int64 } // [lo, hi] holds only one checkpoint's chunks
	var (
		skips  []span
		newest bool
		window = int64(firstWindow)
	)
	for hi := end; hi > logStart; {
		// Probe the last record alone first: most often it is the
		// manifest of a checkpoint written in one piece, whose chunks the
		// scan can then jump over without reading them.
		lo := hi - 1
		recs, err := r.readRange(ctx, lo, hi, 1)
		if err != nil {
			return nil, err
		}
		if !jumpable(recs) {
			lo = max(logStart, hi-window)
			more, err := r.readRange(ctx, lo, hi-1, min(s.opts.FetchBytes, scanFetchBytes))
			if err != nil {
				return nil, err
			}
			recs = append(more, recs...)
		}
		for i := len(recs) - 1; i >= 0; i-- {
			rec := recs[i]
			if header(rec, kindHeader) != kindManifest || rec.Value == nil {
				continue
			}
			m, err := decodeManifest(rec)
			if err != nil {
				s.m.skipped.WithLabelValues("bad_manifest").Inc()
				s.opts.Logger.Warn("checkpoint: skipping an undecodable manifest", "topic", s.opts.Topic, "partition", partition, "offset", rec.Offset, "err", err)
				continue
			}
			if m.contiguous() {
				skips = append(skips, span{m.First, m.Last})
			}
			if m.Group != group || m.Partition != partition {
				continue
			}
			if !newest {
				newest = true
				s.remember(group, partition, m)
				if use == nil {
					return m, nil
				}
			}
			done, err := use(r, m, recs)
			if err != nil {
				return nil, err
			}
			if done {
				return m, nil
			}
		}
		hi = lo
		// Jump over chunks of checkpoints already passed: no manifest
		// lies among them. Below them is most likely the manifest of the
		// checkpoint before, so start small again.
		jumped := false
		for moved := true; moved; {
			moved = false
			for _, sp := range skips {
				if sp.lo < hi && hi-1 <= sp.hi {
					hi, moved, jumped = sp.lo, true, true
				}
			}
		}
		var bytes int
		for _, rec := range recs {
			bytes += len(rec.Value)
		}
		switch {
		case jumped:
			window = firstWindow
		case bytes < growBelowBytes:
			// Small records (manifests, tombstones): read more at once.
			window = min(2*window, maxWindow)
		}
	}
	return nil, nil
}

// jumpable reports whether recs is one manifest whose chunks lie
// contiguously right before it.
func jumpable(recs []*kgo.Record) bool {
	if len(recs) != 1 || header(recs[0], kindHeader) != kindManifest || recs[0].Value == nil {
		return false
	}
	m, err := decodeManifest(recs[0])
	return err == nil && (m.Chunks == 0 || m.contiguous() && m.Last == m.offset-1)
}

// assemble reads the chunks of m, reusing those already in window, and
// checks them against the manifest.
func (s *Store) assemble(ctx context.Context, r *reader, m *manifest, window []*kgo.Record) ([]byte, error) {
	blob := make([]byte, m.Size)
	if m.Chunks == 0 {
		if m.XXH64 != xxhash.Sum64(nil) {
			return nil, fmt.Errorf("%w: hash mismatch", errDamaged)
		}
		return blob, nil
	}
	seen := make([]bool, m.Chunks)
	have := 0
	take := func(rec *kgo.Record) error {
		if rec.Offset < m.First || rec.Offset > m.Last || header(rec, kindHeader) != kindChunk || header(rec, idHeader) != m.ID {
			return nil
		}
		i, err := strconv.Atoi(header(rec, indexHeader))
		if err != nil || i < 0 || i >= m.Chunks {
			return fmt.Errorf("%w: chunk at offset %d has index %q of %d", errDamaged, rec.Offset, header(rec, indexHeader), m.Chunks)
		}
		if len(rec.Value) != m.chunkLen(i) {
			return fmt.Errorf("%w: chunk %d at offset %d has %d bytes, want %d", errDamaged, i, rec.Offset, len(rec.Value), m.chunkLen(i))
		}
		if !seen[i] {
			copy(blob[int64(i)*int64(m.ChunkSize):], rec.Value)
			seen[i] = true
			have++
		}
		return nil
	}
	// The window holds the tail of the range; read what lies before it.
	until := m.Last + 1
	if len(window) > 0 && window[0].Offset <= until {
		until = max(m.First, window[0].Offset)
	}
	if until > m.First {
		if err := s.readEach(ctx, r, m.First, until, take); err != nil {
			return nil, err
		}
	}
	for _, rec := range window {
		if rec.Offset >= until {
			if err := take(rec); err != nil {
				return nil, err
			}
		}
	}
	if have != m.Chunks {
		return nil, fmt.Errorf("%w: %d of %d chunks found in offsets [%d, %d] (compacted, expired or overwritten?)", errDamaged, have, m.Chunks, m.First, m.Last)
	}
	if xxhash.Sum64(blob) != m.XXH64 {
		return nil, fmt.Errorf("%w: blob does not match the manifest's xxhash64", errDamaged)
	}
	return blob, nil
}

// readEach calls f on each record in [lo, hi), one fetch at a time, so a
// big checkpoint is never held twice in memory.
func (s *Store) readEach(ctx context.Context, r *reader, lo, hi int64, f func(*kgo.Record) error) error {
	for cur := lo; cur < hi; {
		// Ask for about what is left of the range, not more.
		want := min(int64(s.opts.FetchBytes), (hi-cur)*int64(s.opts.ChunkBytes+1<<10))
		recs, next, err := r.fetch(ctx, cur, int32(want))
		if err != nil {
			return err
		}
		if next <= cur {
			return r.err("load", cur, fmt.Errorf("%w: no records below %d", errDamaged, hi))
		}
		for _, rec := range recs {
			if rec.Offset >= hi {
				break
			}
			if err := f(rec); err != nil {
				return err
			}
		}
		cur = next
	}
	return nil
}
