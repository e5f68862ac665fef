package joiner

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/classify"
	"github.com/driftline/driftline/pipeline/joiner/dedupe"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/joiner/ownerstate"
	"github.com/driftline/driftline/pipeline/joiner/prefetch"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
	"github.com/driftline/driftline/pipeline/stream/producers"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// partition is the state of one co-partitioned partition number: the
// records, observations and telemetry partitions p are always owned
// together (range assignment over topics of equal partition count).
type partition struct {
	p int32
	// progressAt is when the partition's progress row was last written
	// (seal; wall clock).
	progressAt time.Time
	label      string // p as a metric label
	engine     *classify.Engine
	nodes      *nodeagent.Tracker
	dedupe     *dedupe.Set
	// dec decodes the partition's records; the payloads it returns are
	// reused by the next call.
	dec *contract.Decoder
	// ahead is applyAhead's read-ahead.
	ahead lookahead
	// inHeartbeat is set while a heartbeat is applied: its identity
	// verdict is handed to the engine once, as a confirming heartbeat.
	inHeartbeat bool
	// out receives the partition's finding transitions: a silent output
	// while restoring, live afterwards.
	out *output
	// live collects what the partition produces between flushes; a flush
	// gathers the live outputs of all partitions into one write.
	live output
	// rejected and rerouted are the partition's invalid and
	// mis-partitioned records since the last flush.
	rejected []rejected
	rerouted []*kgo.Record
	// producers counts, per producer and reason, the well-formed records
	// not applied because their producer got time or identity wrong.
	producers producers.Counts
	// merge orders the polled records of the three streams.
	merge logmerge.Merge
	// summary keeps the partition's finding counts and attention top.
	summary *summary
	// acts holds what operator actions added to the findings.
	acts *actionBook
	// requests are the records of reconcile.requests the partition's
	// actions made since the last flush.
	requests []*kgo.Record
	// nodeTop keeps the partition's attention top of nodes and, per
	// node, its row in held (by the node's aux word in the tracker).
	nodeTop *nodeRanking
	// held holds the partition's current finding and node rows until a
	// seal moves them into a batch (sealHeld).
	held heldRows

	events uint64 // events applied (replayed ones included)
	// uncounted holds the events applied by stream that the
	// driftline_joiner_events_total series do not count yet: the
	// partitions apply in parallel, and a shared counter per event cost
	// a cache line passed between the cores (see countEvents).
	uncounted    [numStreams]uint64
	findingsOpen uint64
	dirty        bool // changed since the last seal
	// progressDue and summariesDue are set when the partition's progress
	// row and its summaries (finding counts, finding and node tops) are
	// to be written with its held rows (see sealHeld).
	progressDue, summariesDue bool

	// cpAt and cpEvents are when the last checkpoint was taken and the
	// events applied by then (for a partition assigned with nothing
	// committed, its assignment); saving is set while it is written.
	cpAt     time.Time
	cpEvents uint64
	// snapSize is the size of the last snapshot taken or loaded.
	snapSize int
	saving   atomic.Bool
	// active is when the partition last applied a live record (or was
	// sent a watermark marker): see idle.go.
	active time.Time
}

// logs returns the merge of the partition's streams (for the
// logmerge functions over all partitions).
func (p *partition) logs() *logmerge.Merge { return &p.merge }

// streams returns the streams of the merge (logmerge.ThrottleAll).
func (p *partition) streams() logmerge.Streams { return p.merge.Streams() }

// output collects what a batch of records produces, but for the rows
// the partition holds (heldRows).
type output struct {
	batch *sink.Batch
	m     *metrics
	emit  bool // false while restoring: transitions are already written
}

// heldRows are a partition's rows of the tables that keep one current
// row per key (ReplacingMergeTree, the newest version wins): its
// findings' rows of drift_evidence and its nodes' rows of
// node_agent_status, each key's newest since the partition's last ones
// went into a batch. A seal moves them into the batch or, while the
// joiner is behind, may leave them for later rounds to overwrite
// (sealHeld). A restore's replay emits into them as well: the rows of
// what was applied after the checkpoint, which the previous owner may
// have held back, are written again.
type heldRows struct {
	current sink.Packed[drift.Finding]
	nodes   sink.Packed[nodeagent.Status]
	// seal numbers the rows' generations (from 1): a finding's or a
	// node's rowSlot holds its row while the slot's seal is this one.
	seal uint32
	// at is when the rows last went into a batch (wall clock; at first,
	// when the partition was created).
	at time.Time
}

func (h *heldRows) len() int { return h.current.Len() + h.nodes.Len() }

// moveTo moves the rows into out, a partition's part of a batch being
// sealed. Their memory goes with the batch, and is dropped once it is
// written (batch.reset): a partition holding its rows and batches
// keeping the chunks of the rows they wrote would hold two sets of them.
func (h *heldRows) moveTo(out *sink.Batch, now time.Time) {
	if out.Current.Len() != 0 || out.Nodes.Len() != 0 {
		panic("BUG: a partition's output holds current rows of its own")
	}
	out.Current, h.current = h.current, sink.Packed[drift.Finding]{}
	out.Nodes, h.nodes = h.nodes, sink.Packed[nodeagent.Status]{}
	h.seal++
	h.at = now
}

// rowSlot is where the row of a finding or a node is in its partition's
// held rows: one that changes again before they are sealed overwrites
// its row.
type rowSlot struct {
	row  int32
	seal uint32
}

// upsert writes v as the row at tracks in rows, the rows of the
// generation seal: over the row written before in it, or as a new one.
func upsert[R any](rows *sink.Packed[R], at *rowSlot, seal uint32, v *R) {
	if at.seal == seal {
		rows.Set(int(at.row), v)
		return
	}
	at.row, at.seal = int32(rows.Append(v)), seal
}

// add applies a transition of the partition's engine (aux: the finding's
// word there, which holds its summary slot).
func (o *output) add(p *partition, f *drift.Finding, aux *uint32) {
	switch f.Transition {
	case contract.TransitionOpened, contract.TransitionReopened:
		p.findingsOpen++
	case contract.TransitionResolved:
		p.findingsOpen--
	}
	p.acts.overlay(f, p.engine.Watermark().UnixNano())
	sl := p.summary.apply(f, aux)
	upsert(&p.held.current, &sl.at, p.held.seal, f) // while restoring too (heldRows)
	if !o.emit {
		return
	}
	o.m.transition(f).Inc()
	tr := sink.TransitionOf(f)
	p.acts.annotate(&tr)
	o.batch.History.Append(&tr)
}

// addNode applies a node's status row (aux: the node's word in the
// partition's tracker, which holds its slot in nodeTop), while restoring
// too (heldRows).
func (p *partition) addNode(s *nodeagent.Status, aux *uint32) {
	sl := p.nodeTop.apply(s, aux)
	upsert(&p.held.nodes, &sl.at, p.held.seal, s)
}

func (j *Joiner) newPartition(p int32, out *output) *partition {
	part := &partition{p: p, label: strconv.Itoa(int(p)), dedupe: dedupe.New(j.opts.Dedupe), out: out, summary: newSummary(), nodeTop: newNodeRanking(), acts: newActionBook(), merge: logmerge.NewMerge(numStreams),
		live: output{batch: &sink.Batch{}, m: j.m, emit: true},
		held: heldRows{seal: 1, at: time.Now()},
		dec:  contract.NewDecoder(j.validator)}
	part.engine = classify.New(j.opts.Classify, ownerstate.New(), func(f *drift.Finding, aux *uint32) { part.out.add(part, f, aux) })
	part.nodes = nodeagent.New(j.opts.NodeAgent, func(s *nodeagent.Status, aux *uint32) {
		part.addNode(s, aux)
		if !part.inHeartbeat {
			// Records and the watermark change the verdict too (a
			// clone leaving the host window resolves the finding).
			part.engine.SetNodeIdentity(s.NodeID, s.IdentityMismatch, s.At, s.CorrelationID, false)
			part.engine.SetNodeFleet(s.NodeID, s.AuthorityConflict, s.SupplyChainViolation, s.At, s.CorrelationID, false)
		}
	})
	topics := j.streamTopics()
	part.nodes.SetCoordinates(topics[:], p)
	part.nodes.SetFleetOutput(nodeagent.FleetOutput{
		Transition: func(t *nodeagent.Transition) {
			if part.out.emit {
				part.out.batch.Fleet.Lifecycle.Append(t)
			}
		},
		SyncDebt: func(r *nodeagent.SyncDebtRow) {
			if part.out.emit {
				part.out.batch.Fleet.SyncDebt = append(part.out.batch.Fleet.SyncDebt, sink.SyncDebt{SyncDebtRow: *r, Partition: p})
			}
		},
		// Every partition holds the same registry: partition 0 writes it.
		Artifact: func(a *contract.Artifact, at time.Time) {
			if part.out.emit && p == 0 {
				part.out.batch.Fleet.Artifacts = append(part.out.batch.Fleet.Artifacts, sink.Artifact{Artifact: *a, OccurredAt: at})
			}
		},
		Bundle: func(b *contract.PolicyBundle, at time.Time) {
			if part.out.emit && p == 0 {
				part.out.batch.Fleet.Bundles = append(part.out.batch.Fleet.Bundles, sink.Bundle{PolicyBundle: *b, OccurredAt: at})
			}
		},
	})
	return part
}

// Read-ahead of applyAhead, in four steps, each a few records after the
// one before, so that what a step reads the step before brought in: a
// record's bytes are prefetched readAhead records before it is applied;
// its key is hashed and its index slot prefetched slotAhead records
// before; the slot is read and the identity prefetched identityAhead
// records before; the identity is read and its shapes and timer
// prefetched stateAhead records before. A node's key (heartbeats, node
// records and observations) takes the same steps in the node tracker:
// its slot, the node, the node's id.
const (
	readAhead     = 8
	slotAhead     = 4
	identityAhead = 2
	stateAhead    = 1
)

// lookahead holds the records applyAhead has read but not applied yet.
type lookahead struct {
	recs [readAhead]*kgo.Record
	hash [readAhead]uint64 // the identity key's hash (0: none)
	node [readAhead]bool   // the key is a node's (nodeagent.IsNodeKey)
	// states counts the records whose state was prefetched (the last
	// step), and nodeIDs those whose node's id was, which tells a test
	// the steps line up.
	states, nodeIDs uint64
}

// applyAhead applies the records next returns, until it returns nil, in
// their order, and calls done with each once applied; it returns how
// many it applied. Applying a record waits for memory: its bytes were
// decompressed a while ago, and its identity is one of hundreds of
// thousands. So it reads ahead, and asks the processor to fetch what a
// record will need while the records before it are applied (see package
// prefetch).
func (j *Joiner) applyAhead(part *partition, next func() *kgo.Record, done func(*kgo.Record)) int {
	la, store, nodes := &part.ahead, part.engine.Store(), part.nodes
	k := 0
	for r := next(); r != nil; r = next() {
		s := k % readAhead
		if k >= readAhead {
			j.apply(part, la.recs[s])
			done(la.recs[s])
		}
		la.recs[s], la.hash[s], la.node[s] = r, 0, false
		if len(r.Key) != 0 {
			prefetch.Line(unsafe.Pointer(&r.Key[0]))
		}
		for off := 0; off < len(r.Value) && off < 256; off += 64 {
			prefetch.Line(unsafe.Pointer(&r.Value[off]))
		}
		if n := len(r.Headers); n != 0 {
			// control reads every header's key, and a gateway's three
			// headers span two cache lines: the first and the last byte.
			h := unsafe.Pointer(unsafe.SliceData(r.Headers))
			prefetch.Line(h)
			prefetch.Line(unsafe.Add(h, n*int(unsafe.Sizeof(r.Headers[0]))-1))
		}
		// Record k-readAhead+d is applied d records from now.
		if k >= readAhead-slotAhead {
			if t := (k + slotAhead) % readAhead; len(la.recs[t].Key) != 0 {
				key := la.recs[t].Key
				la.hash[t] = store.Prefetch(key)
				if nodeagent.IsNodeKey(key) {
					la.node[t] = true
					nodes.PrefetchSlot(la.hash[t])
				}
			}
		}
		if k >= readAhead-identityAhead {
			if t := (k + identityAhead) % readAhead; la.hash[t] != 0 {
				store.PrefetchIdentity(la.hash[t])
				if la.node[t] {
					nodes.PrefetchNode(la.hash[t])
				}
			}
		}
		if k >= readAhead-stateAhead {
			if t := (k + stateAhead) % readAhead; la.hash[t] != 0 {
				store.PrefetchState(la.hash[t])
				if la.node[t] {
					nodes.PrefetchID(la.hash[t])
					la.nodeIDs++
				}
				la.states++
			}
		}
		k++
	}
	for i := max(0, k-readAhead); i < k; i++ {
		s := i % readAhead
		j.apply(part, la.recs[s])
		done(la.recs[s])
		la.recs[s] = nil
	}
	j.countEvents(part)
	return k
}

// apply validates, dedupes and applies one Kafka record.
func (j *Joiner) apply(part *partition, r *kgo.Record) {
	part.dirty = true
	if len(r.Headers) != 0 && j.control(part, r) {
		return
	}
	if r.Value == nil && r.Topic == j.opts.Topics.PlatformRecords {
		if provider, id, ok := strings.Cut(string(r.Key), "/"); ok {
			if j.misplaced(part, r, nil) {
				return
			}
			part.engine.SetBound(r.Timestamp)
			part.engine.ApplyTombstone(provider, id, r.Timestamp.UTC())
			if provider == contract.ProviderMAAS {
				part.nodes.ApplyTombstone(provider, id, r.Timestamp.UTC())
			}
			part.events++
			part.uncounted[j.stream(r.Topic)]++
			j.followWatermark(part)
			return
		}
	}
	// Any other null value is no event: the decoder refuses it (bad_json)
	// and it is quarantined as invalid input is, never dropped silently.
	env, payload, digest, verr := part.dec.DecodeEventDigest(r.Value)
	// Scan markers and registry events are written to every partition on
	// purpose; every other event belongs on the partition its key hashes
	// to.
	if verr == nil && !contract.Broadcast(env.EventType) && j.misplaced(part, r, payload) {
		return
	}
	if verr != nil {
		if part.out.emit { // a restore replays records quarantined before
			part.rejected = append(part.rejected, rejected{r, verr})
		}
		j.m.invalid.WithLabelValues(string(verr.Reason)).Inc()
		j.opts.Logger.Debug("invalid record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", verr)
		return
	}
	// Event time is bounded by the log's clock (docs/event-time.md): an
	// event further ahead of its broker timestamp than the skew allows is
	// quarantined, and an accepted one moves event time no further than
	// the broker timestamp (SetBound).
	if j.opts.MaxClockSkew >= 0 && !r.Timestamp.IsZero() && env.OccurredAt.Sub(r.Timestamp) > j.opts.MaxClockSkew {
		j.m.clockSkew.Inc()
		j.reject(part, r, env.Producer, contract.ClockSkewError(env.OccurredAt, r.Timestamp, j.opts.MaxClockSkew))
		return
	}
	switch part.dedupe.Observe(env.Producer, env.HasSeq, env.Seq, env.EventID, env.OccurredAt, uint64(digest)) {
	case dedupe.Duplicate:
		j.m.duplicates.Inc()
		return
	case dedupe.Late:
		j.m.late.Inc()
		j.reject(part, r, env.Producer, contract.LateError(env.OccurredAt, part.engine.Watermark().Add(-j.opts.Dedupe.Horizon)))
		return
	case dedupe.Conflict:
		j.conflict(part, r, &env, contract.Digest(part.dedupe.FirstDigest()), digest)
		return
	}
	part.events++
	part.uncounted[j.stream(r.Topic)]++
	if !j.opts.unbounded {
		part.engine.SetBound(r.Timestamp)
	}
	at := env.OccurredAt.UTC()
	switch p := payload.(type) {
	case *contract.PlatformRecord:
		part.engine.ApplyRecord(p, at, env.CorrelationID)
		if p.Provider == contract.ProviderMAAS {
			part.nodes.ApplyNodeRecord(p, at, env.CorrelationID)
			part.nodes.RecordEvent(p.ProviderID, streamRecords, r.Offset)
		}
	case *contract.Observation:
		part.engine.ApplyObservation(p, at, env.CorrelationID)
		if p.Provider == contract.ProviderMAAS {
			part.nodes.RecordEvent(p.ProviderID, streamObservations, r.Offset)
		}
	case *contract.Artifact:
		part.nodes.ApplyArtifact(p, at, env.CorrelationID)
		part.engine.Advance(at)
	case *contract.PolicyBundle:
		if rerr := part.nodes.ApplyBundle(p, at, env.CorrelationID); rerr != nil {
			j.refuse(part, r, rerr, true)
		}
		part.engine.Advance(at)
	case *contract.ScanCompleted:
		part.engine.ApplyScan(p, at, env.CorrelationID)
	case *contract.Command:
		// An operator's action does not move event time: it is applied
		// at the partition's watermark, where it falls in stream order.
		j.applyCommand(part, p, at, env.CorrelationID)
	case *contract.Heartbeat:
		if rerr := part.nodes.CheckHeartbeat(p); rerr != nil {
			// It names a policy bundle the registry does not have:
			// quarantined, not applied, nothing guessed.
			j.refuse(part, r, rerr, false)
			part.engine.Advance(at)
			break
		}
		part.inHeartbeat = true
		part.nodes.ApplyHeartbeat(p, at, env.CorrelationID)
		part.inHeartbeat = false
		mismatch, authority, supply := part.nodes.HeartbeatVerdicts(p.NodeID, streamTelemetry, r.Offset)
		part.engine.SetNodeIdentity(p.NodeID, mismatch, at, env.CorrelationID, true)
		part.engine.SetNodeFleet(p.NodeID, authority, supply, at, env.CorrelationID, true)
		part.engine.Advance(at)
	default:
		part.engine.Advance(at) // anything else co-partitioned moves event time
	}
	j.followWatermark(part)
}

// followWatermark moves what follows the partition's watermark to it
// after a record moved it: the node tracker's timers, the dedupe set's
// late cut-off and expiry, and the deadlines of pending requests. Every
// record that moves event time (an event, a tombstone, a watermark
// marker) ends with it.
func (j *Joiner) followWatermark(part *partition) {
	w := part.engine.Watermark()
	part.nodes.Advance(w)
	if !w.IsZero() {
		part.dedupe.Advance(w)
		if ns := w.UnixNano(); ns >= part.acts.due {
			j.fireActions(part, ns)
		}
	}
}

// refuse quarantines a well-formed record the registry refuses
// (contract.RegistryReasons): it is not applied. A broadcast record is
// refused by every partition and quarantined by partition 0's only.
func (j *Joiner) refuse(part *partition, r *kgo.Record, verr *contract.ValidationError, broadcast bool) {
	if broadcast && part.p != 0 {
		return
	}
	j.m.invalid.WithLabelValues(string(verr.Reason)).Inc()
	if part.out.emit {
		part.rejected = append(part.rejected, rejected{r, verr})
	}
}

// reject counts a well-formed record of producer that is not applied, by
// its reason, and quarantines it (once: a restore replays records
// quarantined before).
func (j *Joiner) reject(part *partition, r *kgo.Record, producer string, verr *contract.ValidationError) {
	part.producers.Add(producer, verr.Reason, r.Timestamp)
	if part.out.emit {
		part.rejected = append(part.rejected, rejected{r, verr})
	}
}

// conflict handles a record whose dedupe identity was applied before with
// another content digest (first): a producer reusing an event_id or a seq,
// not a redelivery. The first event stays applied; this one is
// quarantined with reason conflicting_duplicate and counted for its
// producer.
func (j *Joiner) conflict(part *partition, r *kgo.Record, env *contract.Envelope, first, digest contract.Digest) {
	field := "event_id"
	if env.HasSeq {
		field = "seq"
	}
	j.reject(part, r, env.Producer, &contract.ValidationError{
		Reason: contract.ReasonConflictingDuplicate, Field: field,
		Detail: "producer " + env.Producer + " sent this " + field + " before with content digest " + first.String() +
			", this event's is " + digest.String() + ": the first stays applied",
	})
	if part.out.emit {
		j.m.conflicts.Inc()
	}
}

// misplaced handles a record whose key does not hash (Kafka-standard
// murmur2) to the partition it arrived on: a producer bypassed the
// standard partitioner, and the rest of its identity lives elsewhere. The
// key is the identity key of payload (contract.KeyOf) when there is one:
// a record without a key, or with another identity's, belongs with the
// identity it is about. With a rerouting producer the record is moved to
// its partition, keyed by that key (and a restore skips it: it was moved
// when first read) and misplaced reports true; otherwise it is applied
// here (see Options.Reroute). Either way it is counted once. payload is
// nil for a tombstone, whose key is all it has.
func (j *Joiner) misplaced(part *partition, r *kgo.Record, payload any) bool {
	if j.partitions <= 0 {
		return false
	}
	key := r.Key
	if payload != nil && !contract.KeyIs(key, payload) {
		key = contract.AppendKey(nil, payload)
	}
	if key == nil || contract.Partition(key, j.partitions) == r.Partition {
		return false
	}
	if part.out.emit {
		j.m.mispartitioned.WithLabelValues(r.Topic).Inc()
	}
	if j.opts.Reroute == nil {
		return false
	}
	if part.out.emit {
		r.Key = key // the copy is keyed as its payload is (rerouteCopies)
		part.rerouted = append(part.rerouted, r)
	}
	return true
}

// progress returns the partition's progress row.
func (j *Joiner) progress(part *partition) sink.Progress {
	return sink.Progress{
		Consumer:     j.opts.Group,
		Partition:    part.p,
		Watermark:    part.engine.Watermark(),
		Events:       part.events,
		FindingsOpen: part.findingsOpen,
		Position:     part.merge.Position(),
	}
}

func (j *Joiner) observe(part *partition) {
	j.m.findingsOpen.WithLabelValues(part.label).Set(float64(part.findingsOpen))
	if w := part.engine.Watermark(); !w.IsZero() {
		j.m.watermark.WithLabelValues(part.label).Set(float64(w.Unix()))
	}
}

// snapshotVersion is the format of a partition's checkpoint blob. Version
// 2 added the per-producer rejection counts and the action book; a
// version 1 blob restores with neither. Version 3 added the version of
// the attention top of nodes; without it, the top's rows start from the
// highest version of a node's row.
const snapshotVersion = 3

// snapshot serialises the partition's state: everything applied so far,
// which is exactly the committed cut when called right after a commit.
func (part *partition) snapshot() []byte {
	// Sized after the previous snapshot (or the checkpoint restored), so
	// that the buffer is not grown, and copied, a dozen times on the way,
	// and after the state, which may have grown by more than an eighth
	// since (a partition catching up): grown from 64 KiB, the first took
	// four times as long as the next (BenchmarkSnapshotFirst against
	// BenchmarkSnapshot1M/save). The dedupe section, the digest of every
	// seq and id within the horizon, is much of a snapshot after a
	// catch-up and is counted exactly (Set.SnapshotSize): estimated per
	// producer, it was not, and growing the snapshots a joiner took when
	// it stopped after 10M events cost 0.6-2.9 of their 1.4-4.4 CPU s.
	size := max(part.snapSize+part.snapSize/8,
		firstSnapshotSize(part.engine.Store().Len(), part.nodes.Len())+part.dedupe.SnapshotSize())
	w := snap.Writer{B: make([]byte, 0, max(1<<16, size))}
	w.Header("joiner.partition", snapshotVersion)
	w.Varint(int64(part.p))
	w.Uvarint(part.events)
	w.Uvarint(part.findingsOpen)
	part.engine.AppendSnapshot(&w)
	part.nodes.AppendSnapshot(&w)
	part.dedupe.AppendSnapshot(&w)
	part.summary.appendSnapshot(&w)
	part.producers.AppendSnapshot(&w)
	part.acts.appendSnapshot(&w)
	w.Uvarint(part.nodeTop.ver)
	part.snapSize = len(w.B)
	return w.B
}

// firstSnapshotSize estimates the bytes of a snapshot of a partition with
// the given identities and node-agent nodes, but for its dedupe section,
// on the high side: the state of a generated fleet takes about 216 bytes
// per identity (a partition of the 1M-event fleet; the 1,000,000
// identities of BenchmarkSnapshot1M take 99 each) and, with the fleet
// core's lifecycle, tags and recent events, about 490 per node (a
// partition of the 10M-event fleet: 56.9 MB for 166,399 identities and
// 32,638 nodes; at the 200 per node estimated before, every partition's
// first snapshot there outgrew its buffer and was copied into one twice
// its size).
func firstSnapshotSize(identities, nodes int) int {
	return 240*identities + 560*nodes + 1<<20
}

// loadSnapshot restores the state snapshot wrote into a new partition.
func (part *partition) loadSnapshot(b []byte) error {
	r := snap.NewReader(b)
	version := r.HeaderIn("joiner.partition", 1, snapshotVersion)
	p := int32(r.Varint())
	events, open := r.Uvarint(), r.Uvarint()
	if err := r.Err(); err != nil {
		return err
	}
	if p != part.p {
		return fmt.Errorf("snapshot of partition %d, not %d", p, part.p)
	}
	if err := part.engine.LoadSnapshot(r); err != nil {
		return err
	}
	if err := part.nodes.LoadSnapshot(r); err != nil {
		return err
	}
	if err := part.dedupe.LoadSnapshot(r); err != nil {
		return err
	}
	if err := part.summary.loadSnapshot(r); err != nil {
		return err
	}
	if version >= 2 {
		if err := part.producers.LoadSnapshot(r); err != nil {
			return err
		}
		if err := part.acts.loadSnapshot(r); err != nil {
			return err
		}
	}
	var nodeTopVer uint64
	if version >= 3 {
		nodeTopVer = r.Uvarint()
		if err := r.Err(); err != nil {
			return fmt.Errorf("node attention top: %w", err)
		}
	}
	part.nodeTop.rebuild(part.nodes.Rebind, nodeTopVer)
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the snapshot", r.Len())
	}
	part.events, part.findingsOpen = events, open
	part.snapSize = len(b)
	return nil
}

// countEvents adds the partition's uncounted events to the per-stream
// series, once per run of records applied rather than once per event.
func (j *Joiner) countEvents(part *partition) {
	for st, n := range part.uncounted {
		if n != 0 {
			j.eventCounters[st].Add(float64(n))
			part.uncounted[st] = 0
		}
	}
}

// gather moves what the partition produced since the last seal into b:
// its output becomes one of b's parts, and the partition goes on with an
// empty one (a part of a batch written before, or a new one). Copied
// into one batch instead, a catch-up round's rows (hundreds of
// thousands of findings) cost 50-70 ms of the poll loop at every seal.
// The member's lock is held.
func (j *Joiner) gather(part *partition, b *batch) *sink.Batch {
	var next *sink.Batch
	if n := len(j.freeParts); n > 0 {
		next, j.freeParts = j.freeParts[n-1], j.freeParts[:n-1]
	} else {
		next = &sink.Batch{}
	}
	out := part.live.batch
	part.nodes.Rollouts(func(r *nodeagent.RolloutRow) {
		out.Fleet.Rollouts = append(out.Fleet.Rollouts, sink.Rollout{RolloutRow: *r, Partition: part.p})
	})
	part.live.batch = next
	b.parts = append(b.parts, out)
	b.rejected = append(b.rejected, part.rejected...)
	b.rerouted = append(b.rerouted, part.rerouted...)
	b.requests = append(b.requests, part.requests...)
	clear(part.requests)
	part.requests = part.requests[:0]
	clear(part.rejected)
	clear(part.rerouted)
	part.rejected, part.rerouted = part.rejected[:0], part.rerouted[:0]
	return out
}
