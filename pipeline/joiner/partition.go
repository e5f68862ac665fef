package joiner

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/classify"
	"github.com/driftline/driftline/pipeline/dedupe"
	"github.com/driftline/driftline/pipeline/drift"
	"github.com/driftline/driftline/pipeline/event"
	"github.com/driftline/driftline/pipeline/ownerstate"
	"github.com/driftline/driftline/pipeline/sink"
)

// partition is the state of one co-partitioned partition number: the
// records, observations and telemetry partitions p are always owned
// together (range assignment over topics of equal partition count).
type partition struct {
	p      int32
	label  string // p as a metric label
	engine *classify.Engine
	dedupe *dedupe.Set
	// out receives the partition's finding transitions: a silent output
	// while restoring, the joiner's batch afterwards.
	out *output
	// recordsRestored is the platform.records offset the restore read up
	// to; the group consumer skips records below it.
	recordsRestored int64

	events       uint64 // events applied (replayed ones included)
	findingsOpen uint64
	dirty        bool // changed since the last progress row
}

// output collects what a batch of records produces.
type output struct {
	batch   sink.Batch
	current map[string]int // evidence id -> index in batch.Current
	m       *metrics
	emit    bool // false while restoring: transitions are already written
}

func (o *output) add(p *partition, f *drift.Finding) {
	switch f.Transition {
	case drift.TransitionOpened, drift.TransitionReopened:
		p.findingsOpen++
	case drift.TransitionResolved:
		p.findingsOpen--
	}
	if !o.emit {
		return
	}
	o.m.transitions.WithLabelValues(f.Class.String(), f.Transition).Inc()
	o.batch.History = append(o.batch.History, *f)
	if i, ok := o.current[f.EvidenceID]; ok {
		o.batch.Current[i] = *f
		return
	}
	o.current[f.EvidenceID] = len(o.batch.Current)
	o.batch.Current = append(o.batch.Current, *f)
}

func (o *output) reset() {
	o.batch.Reset()
	clear(o.current)
}

func (j *Joiner) newPartition(p int32, out *output) *partition {
	part := &partition{p: p, label: strconv.Itoa(int(p)), dedupe: dedupe.New(), out: out}
	part.engine = classify.New(j.opts.Classify, ownerstate.New(), func(f *drift.Finding) { part.out.add(part, f) })
	return part
}

// apply validates, dedupes and applies one Kafka record.
func (j *Joiner) apply(part *partition, r *kgo.Record) {
	if part.out.emit && r.Topic == j.opts.Topics.PlatformRecords && r.Offset < part.recordsRestored {
		return // applied by the restore already
	}
	part.dirty = true
	if j.partitions > 0 && r.Key != nil && event.Partition(r.Key, j.partitions) != r.Partition {
		// A producer bypassed the Kafka-standard partitioner. The record
		// is still applied here; see docs/drift-model.md (mis-partitioned
		// records).
		j.m.mispartitioned.WithLabelValues(r.Topic).Inc()
	}
	if r.Value == nil {
		if r.Topic == j.opts.Topics.PlatformRecords {
			if provider, id, ok := strings.Cut(string(r.Key), "/"); ok {
				part.engine.ApplyTombstone(provider, id, r.Timestamp.UTC())
				part.events++
				j.m.events.WithLabelValues(r.Topic).Inc()
				return
			}
		}
		j.m.invalid.WithLabelValues("tombstone_without_identity").Inc()
		return
	}
	env, payload, verr := j.validator.DecodeEvent(r.Value)
	if verr != nil {
		j.m.invalid.WithLabelValues(string(verr.Reason)).Inc()
		j.opts.Logger.Debug("invalid record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", verr)
		return
	}
	if part.dedupe.Observe(env.Producer, env.HasSeq, env.Seq, env.EventID) {
		j.m.duplicates.Inc()
		return
	}
	part.events++
	j.m.events.WithLabelValues(r.Topic).Inc()
	at := env.OccurredAt.UTC()
	switch p := payload.(type) {
	case *event.PlatformRecord:
		part.engine.ApplyRecord(p, at, env.CorrelationID)
	case *event.Observation:
		part.engine.ApplyObservation(p, at, env.CorrelationID)
	case *event.ScanCompleted:
		part.engine.ApplyScan(p, at, env.CorrelationID)
	default:
		// Heartbeats (and anything else co-partitioned) move event time.
		part.engine.Advance(at)
	}
}

// progress returns the partition's progress row.
func (j *Joiner) progress(part *partition) sink.Progress {
	return sink.Progress{
		Consumer:     j.opts.Group,
		Partition:    part.p,
		Watermark:    part.engine.Watermark(),
		Events:       part.events,
		FindingsOpen: part.findingsOpen,
	}
}

func (j *Joiner) observe(part *partition) {
	j.m.findingsOpen.WithLabelValues(part.label).Set(float64(part.findingsOpen))
	if w := part.engine.Watermark(); !w.IsZero() {
		j.m.watermark.WithLabelValues(part.label).Set(float64(w.Unix()))
	}
}
