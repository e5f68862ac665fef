package joiner

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Idle partitions.
//
// A partition's event time moves only with its own records, so a partition
// that receives nothing (a quiet provider, a small fleet spread over many
// partitions) would never see its staleness and orphan deadlines pass.
// When a partition has applied nothing for Options.IdleAfter while
// another partition of this joiner has a later watermark, the joiner
// writes a watermark marker to the idle partition's observations stream:
// a record with header HeaderControl = "watermark" and the watermark as
// its value (RFC 3339). Applying it advances the partition's watermark to
// that value. Because the marker is in the log, a replay or a restore
// applies it at the same place and yields the same findings; the decision
// to write one is the only wall-clock-driven step.
//
// A marker moves event time no further than its own broker timestamp, as
// any record does (docs/event-time.md), and is never written with a value
// past the joiner's clock: a partition whose watermark a producer moved
// into the future before the bounds existed cannot spread it to the
// others.

// HeaderControl marks a record the joiner wrote for itself; its value
// names the kind ("watermark").
const HeaderControl = "driftline_control"

const controlWatermark = "watermark"

// control reports whether r is a joiner control record and, if so,
// applies it.
func (j *Joiner) control(part *partition, r *kgo.Record) bool {
	var kind string
	for _, h := range r.Headers {
		if h.Key == HeaderControl {
			kind = string(h.Value)
		}
	}
	switch kind {
	case "":
		return false
	case controlWatermark:
		w, err := time.Parse(time.RFC3339Nano, string(r.Value))
		if err != nil {
			j.m.invalid.WithLabelValues("bad_control_record").Inc()
			return true
		}
		part.engine.SetBound(r.Timestamp)
		part.engine.AdvanceWatermark(w)
		j.followWatermark(part)
		part.dirty = true
		if part.out.emit {
			j.m.idleAdvances.Inc()
		}
	default:
		j.m.invalid.WithLabelValues("bad_control_record").Inc()
	}
	return true
}

// advanceIdle writes a watermark marker to each owned partition that has
// been idle for IdleAfter while another owned partition's watermark is
// later. A failed write is retried at the next round. The member's lock
// is held.
func (j *Joiner) advanceIdle(ctx context.Context) {
	if j.opts.IdleAfter < 0 || len(j.parts) < 2 {
		return
	}
	var latest time.Time
	for _, part := range j.parts {
		if w := part.engine.Watermark(); w.After(latest) {
			latest = w
		}
	}
	now := time.Now()
	if latest.After(now) {
		latest = now
	}
	var markers []*kgo.Record
	for p, part := range j.parts {
		if now.Sub(part.active) < j.opts.IdleAfter || !part.engine.Watermark().Before(latest) {
			continue
		}
		part.active = now // one marker per IdleAfter at most
		markers = append(markers, &kgo.Record{Topic: j.opts.Topics.Observations, Partition: p,
			Value: []byte(latest.UTC().Format(time.RFC3339Nano)), Headers: []kgo.RecordHeader{{Key: HeaderControl, Value: []byte(controlWatermark)}}})
	}
	if len(markers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := j.markers.ProduceSync(ctx, markers...).FirstErr(); err != nil {
		j.opts.Logger.Warn("watermark marker not written; retried later", "err", fmt.Errorf("produce: %w", err))
	}
}
