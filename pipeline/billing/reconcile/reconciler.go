package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
	"github.com/driftline/driftline/pipeline/stream/producers"
)

// Reconciler is one member of the billing reconciler consumer group: the
// processor of a stream.Member (see member.go).
type Reconciler struct {
	opts Options
	sink Sink
	m    *metrics
	// decoder decodes without copying: its strings alias the record and
	// live while the record is applied; the tracker copies what it keeps,
	// and keepRated the rated lines of the batch.
	decoder *contract.Decoder
	member  *stream.Member

	// partitions is the partition count of the billing topics, for the
	// mis-partitioning check.
	partitions int32

	// The member's lock protects parts, out and flow: its poll loop holds
	// it while it applies and flushes, its group callbacks while they
	// restore or drop partitions.
	parts map[int32]*partition
	out   output
	// keyBuf holds the usage key of the record being applied when its
	// own key is not (home).
	keyBuf []byte
	// flow pauses streams that ran ahead in their merges (throttle).
	flow logmerge.Throttle
	gc   service.GCPacer
	// pager keeps the trackers' states within Options.StateMemory; nil
	// when they all stay in memory. spilled holds its counts already
	// added to the metrics.
	pager   *pager
	spilled [2]int64
	// behind tells the rounds that the round holds maxRoundRows or a
	// partition's tracker is Behind (applyAll): the round ends, and the
	// next one's poll does not wait for records (logmerge.Rounds.Pending).
	behind atomic.Bool
}

// partition is the state of one partition number of the three billing
// topics, which range assignment always hands out together.
type partition struct {
	p       int32
	label   string
	tracker *Tracker
	out     *output // silent while restoring, the live batch afterwards
	dirty   bool
	// merge orders the polled records of the three streams.
	merge logmerge.Merge
	// marker is, per stream, the position after the last transaction
	// marker fetched (the rater's commits on billing.rated): the merge
	// moves past it once every record before it is applied (markers).
	marker [numStreams]kgo.EpochOffset
	// pruned and late are the tracker's counts already added to the
	// metrics.
	pruned, late int64
	// producers counts, per producer and reason, the well-formed records
	// not applied because their producer got time wrong.
	producers producers.Counts
	// pushed counts, per stream, the records pushed into the merge since
	// the last apply (compactQueues).
	pushed [numStreams]int
}

// logs returns the merge of the partition's streams (for the
// logmerge functions over all partitions).
func (p *partition) logs() *logmerge.Merge { return &p.merge }

// streams returns the streams of the merge (logmerge.ThrottleAll).
func (p *partition) streams() logmerge.Streams { return p.merge.Streams() }

// output collects what a batch of records produces.
type output struct {
	batch Batch
	// rejected are the records to quarantine before the batch commits.
	rejected []rejected
	current  map[string]int // mismatch_id -> number of its row in batch.Mismatches
	rows     int            // mismatch rows in batch.Mismatches
	// spare are chunks of mismatch rows for the next rounds (reset).
	spare [][]Mismatch
	m     *metrics
	emit  bool // false while restoring: the rows are already written
	// own: the rows' strings are copied (keepMismatch), for the trackers
	// spill.
	own bool
}

func (o *output) add(m *Mismatch) {
	if !o.emit {
		return
	}
	o.m.transitions.WithLabelValues(string(m.Kind), string(m.Status)).Inc()
	row := *m
	if o.own {
		keepMismatch(&row)
	}
	if i, ok := o.current[row.MismatchID]; ok {
		o.batch.Mismatches[i/MismatchChunk][i%MismatchChunk] = row
		return
	}
	o.current[row.MismatchID] = o.rows
	k := o.rows / MismatchChunk
	if k == len(o.batch.Mismatches) {
		var c []Mismatch
		if n := len(o.spare); n > 0 {
			c, o.spare = o.spare[n-1], o.spare[:n-1]
		} else {
			c = make([]Mismatch, 0, MismatchChunk)
		}
		o.batch.Mismatches = append(o.batch.Mismatches, c)
	}
	o.batch.Mismatches[k] = append(o.batch.Mismatches[k], row)
	o.rows++
}

// rejected is a record not applied, with why.
type rejected struct {
	rec  *kgo.Record
	verr *contract.ValidationError
}

// reset empties the output for the next round, keeping its capacity
// unless a round left much more of it than this one used: one event may
// open thousands of mismatches (a watermark that passes the rating grace
// of every waiting usage at once), and that round's rows, a few hundred
// bytes each, would otherwise stay in memory to the end. The mismatch
// rows are in chunks, which a spike of them fills without copying the
// rows into an array twice their size; the chunks this round used are
// kept for the next (up to keptRows of them always).
func (o *output) reset() {
	shrink := false
	for _, c := range o.batch.Mismatches {
		clear(c) // the strings the rows hold
		o.spare = append(o.spare, c[:0])
	}
	if keep := max(keptRows, o.rows) / MismatchChunk; len(o.spare) > keep {
		clear(o.spare[keep:])
		o.spare, shrink = o.spare[:keep], true
	}
	o.rows = 0
	oversized(&o.batch.Rated)
	oversized(&o.batch.Windows)
	o.batch.Reset()
	clear(o.rejected)
	o.rejected = o.rejected[:0]
	if shrink {
		o.current = map[string]int{}
	} else {
		clear(o.current)
	}
}

// keptRows is the capacity of a batch's rows that reset always keeps.
const keptRows = 1 << 14

// maxRoundRows bounds the mismatch rows of a round (applyAll): about 30
// MB of rows. A variable only for tests.
var maxRoundRows = 100_000

// full reports whether the output holds a round's rows (maxRoundRows).
func (o *output) full() bool { return o.rows >= maxRoundRows }

// MismatchChunk is the number of rows of a chunk of Batch.Mismatches.
const MismatchChunk = 4096

// oversized drops the rows of *rows, and reports whether it did, when
// their capacity is over keptRows and more than four times their number.
func oversized[R any](rows *[]R) bool {
	if c := cap(*rows); c <= keptRows || len(*rows) > c/4 {
		return false
	}
	*rows = nil
	return true
}

// fetchMaxBytes bounds one fetch of the reconciler (compressed), below the
// members' stream.FetchMaxBytes: a fetch is decompressed whole, and its
// buffers stay until every record of it is applied or copied out of them
// (compactQueues); the reconciler's records are small and its merges wait
// on one stream for another, so smaller fetches cost little time and
// hold a quarter of the memory.
const fetchMaxBytes = 2 << 20

// New connects to the brokers and returns a Reconciler writing to s.
func New(ctx context.Context, opts Options, s Sink) (*Reconciler, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &Reconciler{
		opts:    opts,
		sink:    s,
		m:       newMetrics(opts.Registerer),
		decoder: contract.NewDecoder(contract.Validator{Environment: opts.Environment, ZeroCopy: true}),
		parts:   map[int32]*partition{},
		flow:    logmerge.NewThrottle(opts.QueueRecords),
	}
	r.out = output{current: map[string]int{}, m: r.m, emit: true}
	r.gc.Headroom = opts.GCHeadroom
	if opts.StateMemory > 0 {
		r.pager = newPager(opts.StateMemory, opts.SpillDir)
		r.out.own = true
		if err := r.pager.check(); err != nil {
			return nil, err
		}
	}
	var err error
	mopts := opts.Member("billing", opts.Topics.Billing())
	mopts.KeepControlRecords, mopts.Rounds = true, opts.Rounds()
	mopts.Rounds.Pending = r.behind.Load
	mopts.ConsumerOpts = []kgo.Opt{kgo.FetchMaxBytes(fetchMaxBytes), kgo.FetchMaxPartitionBytes(fetchMaxBytes / 4)}
	r.member, err = stream.NewMember(ctx, mopts)
	if err != nil {
		return nil, err
	}
	r.partitions = r.member.Partitions()
	if err := r.member.Join(ctx, (*processor)(r)); err != nil {
		return nil, err
	}
	return r, nil
}

// Run consumes until ctx is done or the client is closed. Each round polls
// for up to FlushInterval or FlushEvents (longer while it catches up: see
// logmerge.Rounds), applies the records, writes the rows, commits the
// offsets, and only then lets a rebalance proceed.
func (r *Reconciler) Run(ctx context.Context) error { return r.member.Run(ctx) }

// flush writes the pending batch (retrying until it succeeds or ctx ends;
// on shutdown for a bounded time) and then commits the offsets of
// everything applied: the merges' positions, not the fetch positions,
// since polled records may wait in a merge. A failed commit means a
// replay of the batch, which writes the same rows again. The member's
// lock is held.
func (r *Reconciler) flush(ctx context.Context) error {
	dirty := false
	r.observeSpill()
	for _, part := range r.parts {
		if part.dirty {
			r.observe(part)
			part.dirty, dirty = false, true
		}
		part.tracker.TakeWindows(func(w *Window) { r.out.batch.Windows = append(r.out.batch.Windows, *w) })
		r.out.batch.Producers = readmodel.AppendProducerRejections(r.out.batch.Producers, r.opts.Group, part.p, &part.producers)
	}
	names := r.streamTopics()
	var offsets map[string]map[int32]kgo.EpochOffset
	for p, part := range r.parts {
		if !part.tracker.Behind() { // applyAll
			offsets = part.merge.Uncommitted(p, names[:], offsets)
		}
	}
	// A round of transaction markers alone (the rater's last commit on
	// billing.rated) changes no row but moves the positions: committing
	// them leaves the group no lag.
	if !dirty && r.out.batch.Empty() && len(offsets) == 0 {
		return nil
	}
	empty := r.out.batch.Empty()
	committed, err := r.member.WriteThenCommit(ctx, offsets, stream.Write{What: "write billing rows to ClickHouse",
		Do: func(ctx context.Context) error {
			if q := r.opts.Quarantine; q != nil && len(r.out.rejected) > 0 {
				for _, rj := range r.out.rejected {
					q.Produce(ctx, rj.rec, rj.verr)
				}
				if err := q.Flush(ctx); err != nil {
					return fmt.Errorf("quarantine: %w", err)
				}
			}
			if empty {
				return nil
			}
			start := time.Now()
			if err := r.sink.Write(ctx, &r.out.batch); err != nil {
				r.m.flushErrors.Inc()
				return err
			}
			r.m.flushSeconds.Observe(time.Since(start).Seconds())
			return nil
		}})
	if err != nil {
		return err
	}
	r.out.reset()
	if committed {
		logmerge.CommittedAll(offsets, names[:], r.parts, (*partition).logs)
	}
	return nil
}

// applyAll applies, per partition, what its merge can release, and
// returns the number of records applied. The member's lock is held (or
// parts is a restore's own).
//
// A round holds at most maxRoundRows rows, give or take the rows of one
// record: one event may pass the grace of every usage waiting on its
// partition, a million rows after a rater outage. Its tracker then stops
// (Tracker.SetFull) and is Behind: its partition applies nothing more
// until the next rounds have passed the rest (Resume), and commits no
// offset before (flush), so that a restart replays that event and raises
// its rows again.
func (r *Reconciler) applyAll(parts map[int32]*partition) int {
	n := 0
	for _, part := range parts {
		t := part.tracker
		if t.Behind() {
			r.pager.trim(true)
			t.Resume()
		}
		for !t.Behind() && !part.out.full() {
			rec, _ := part.merge.Pop()
			if rec == nil {
				break
			}
			r.apply(parts, rec)
			n++
		}
	}
	return n
}

// anyBehind reports whether a partition's tracker is Behind (applyAll).
func (r *Reconciler) anyBehind() bool {
	for _, part := range r.parts {
		if part.tracker.Behind() {
			return true
		}
	}
	return false
}

func (r *Reconciler) newPartition(p int32, out *output) *partition {
	part := &partition{p: p, label: strconv.Itoa(int(p)), out: out, merge: logmerge.NewMerge(numStreams)}
	part.tracker = NewTracker(r.opts.Rules, r.opts.Prices.Book, func(m *Mismatch) { part.out.add(m) })
	part.tracker.SetPartition(p)
	part.tracker.SetFull(func() bool { return part.out.full() })
	if r.pager != nil {
		part.tracker.spill(r.pager)
	}
	return part
}

// apply decodes one record and applies it to its partition (home).
func (r *Reconciler) apply(parts map[int32]*partition, rec *kgo.Record) {
	part := parts[rec.Partition]
	part.dirty = true
	if r.pager.over() { // trim checks too; this test is the fast path, inlined
		r.pager.trim(true) // between two records: no tracker holds a state
	}
	if rec.Value == nil {
		r.m.invalid.WithLabelValues("tombstone").Inc()
		return
	}
	env, payload, verr := r.decoder.DecodeEvent(rec.Value)
	if verr != nil {
		// The gateway and the rater validate what they write; a record
		// that still fails was written around them. It changes nothing.
		r.m.invalid.WithLabelValues(string(verr.Reason)).Inc()
		r.opts.Logger.Debug("invalid record", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", verr)
		return
	}
	here := part
	if part = r.home(parts, here, rec, payload); part == nil {
		return
	}
	if part != here {
		// A record applied on another partition holds back neither
		// (applyAll): the offsets it would hold are those of the
		// partition it came from. The other passes the deadlines its
		// watermark passed whole, before the record and after it.
		part.tracker.CatchUp()
		defer part.tracker.CatchUp()
	}
	// Event time is bounded by the log's clock, as in the joiner
	// (docs/event-time.md).
	if r.opts.MaxClockSkew >= 0 && !rec.Timestamp.IsZero() && env.OccurredAt.Sub(rec.Timestamp) > r.opts.MaxClockSkew {
		r.reject(part, rec, &env, contract.ClockSkewError(env.OccurredAt, rec.Timestamp, r.opts.MaxClockSkew))
		return
	}
	at := env.OccurredAt.UTC()
	t := part.tracker
	if _, ok := payload.(*contract.Usage); ok {
		// Usage older than the horizon may have lost the usage key it
		// would be judged against: refused as the rater refuses it.
		if before, late := t.Late(at); late {
			r.reject(part, rec, &env, contract.LateError(env.OccurredAt, before))
			return
		}
	}
	r.m.events.WithLabelValues(rec.Topic).Inc()
	t.SetBound(rec.Timestamp)
	switch p := payload.(type) {
	case *contract.Usage:
		if t.ApplyUsageDigest(p, contract.PayloadDigest(env.Payload), at) {
			// A conflict is a finding (conflicting_usage), and its producer
			// is counted like the joiner's conflicting duplicates.
			part.producers.Add(env.Producer, contract.ReasonConflictingDuplicate, rec.Timestamp)
		}
	case *contract.Rated:
		if t.ApplyRated(p, at) && part.out.emit {
			part.out.batch.Rated = append(part.out.batch.Rated, keepRated(p))
		}
	case *contract.LedgerEntry:
		t.ApplyLedger(p, at)
	default:
		t.Advance(at)
	}
}

// home returns the partition a decoded record is applied to: the one the
// usage key of its payload hashes to (contract.KeyOf: the record's own
// key may be missing or another's) when parts holds it, else the one it
// arrived on (here); a producer that bypassed the standard partitioner
// is corrected and counted. But usage, which the rater moves to the
// partition of its usage key (the rater's reroute), is left to that
// partition's owner, who applies the copy: home returns nil.
func (r *Reconciler) home(parts map[int32]*partition, here *partition, rec *kgo.Record, payload any) *partition {
	if r.partitions <= 0 {
		return here
	}
	key, keyed := rec.Key, contract.KeyIs(rec.Key, payload)
	if !keyed {
		r.keyBuf = contract.AppendKey(r.keyBuf[:0], payload)
		key = r.keyBuf
	}
	want := contract.Partition(key, r.partitions)
	if keyed && want == rec.Partition {
		return here
	}
	r.m.mispartitioned.WithLabelValues(rec.Topic).Inc()
	if want == rec.Partition {
		return here // keyed as another, but on its usage key's partition
	}
	if p := parts[want]; p != nil {
		p.dirty = true
		return p
	}
	if _, usage := payload.(*contract.Usage); usage {
		return nil
	}
	return here
}

// reject counts a well-formed record not applied, against its producer,
// and quarantines it (but in a restore, which replays records quarantined
// before).
func (r *Reconciler) reject(part *partition, rec *kgo.Record, env *contract.Envelope, verr *contract.ValidationError) {
	r.m.invalid.WithLabelValues(string(verr.Reason)).Inc()
	part.producers.Add(env.Producer, verr.Reason, rec.Timestamp)
	if part.out.emit {
		part.out.rejected = append(part.out.rejected, rejected{rec, verr})
	}
	r.opts.Logger.Debug("record rejected", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", verr)
}

// observeSpill brings the metrics of the scratch files up to date.
func (r *Reconciler) observeSpill() {
	if p := r.pager; p != nil {
		r.m.stateMemory.Set(float64(p.resident))
		r.m.spillReads.Add(float64(p.reads - r.spilled[0]))
		r.m.spillWrites.Add(float64(p.writes - r.spilled[1]))
		r.spilled = [2]int64{p.reads, p.writes}
	}
}

func (r *Reconciler) observe(part *partition) {
	r.m.open.WithLabelValues(part.label).Set(float64(part.tracker.Open()))
	usage, windows := part.tracker.Tracked()
	r.m.trackedUsage.WithLabelValues(part.label).Set(float64(usage))
	r.m.trackedWindows.WithLabelValues(part.label).Set(float64(windows))
	pruned, late := part.tracker.Pruned()
	r.m.pruned.Add(float64(pruned - part.pruned))
	r.m.late.Add(float64(late - part.late))
	part.pruned, part.late = pruned, late
	if w := part.tracker.Watermark(); !w.IsZero() {
		r.m.watermark.WithLabelValues(part.label).Set(float64(w.Unix()))
	}
}

// throttle pauses the streams that ran ahead in their merges and resumes
// those drained again (logmerge.Throttle). The member's lock is held.
func (r *Reconciler) throttle() {
	names := r.streamTopics()
	paused, _ := logmerge.ThrottleAll(&r.flow, r.member.Client(), names[:], r.parts, (*partition).streams)
	r.m.Pauses.Add(float64(paused))
}

// keepMismatch lets the strings of row that may alias a spilling
// tracker's arenas share no memory with them: such a string would keep
// its chunk in memory, after it went to the file, until the batch is
// written. The usage_id is the end of the mismatch_id (a new string) for
// every kind but duplicate_usage, and the metering_id often the end of
// the usage_id; the quantities and amounts are copied together. The
// interned strings (source, tenant, product, unit, currency) are the
// tracker's own and never spill.
func keepMismatch(row *Mismatch) {
	row.UsageID = keepSuffix(row.MismatchID, row.UsageID)
	row.MeteringID = keepSuffix(row.UsageID, row.MeteringID)
	keepStrings(&row.Quantity, &row.ConflictQuantity, &row.RatedAmount, &row.LedgerAmount)
}

// keepSuffix returns s as the end of kept when it is, else a copy.
func keepSuffix(kept, s string) string {
	if strings.HasSuffix(kept, s) {
		return kept[len(kept)-len(s):]
	}
	return strings.Clone(s)
}

// keepStrings makes the strings fields point into one allocation of
// their own.
func keepStrings(fields ...*string) {
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	var b strings.Builder
	b.Grow(n)
	for _, f := range fields {
		b.WriteString(*f)
	}
	all, off := b.String(), 0
	for _, f := range fields {
		l := len(*f)
		*f = all[off : off+l]
		off += l
	}
}

// keepRated returns a copy of the rated line p whose strings share one
// allocation of their own instead of aliasing the record (the decoder's
// strings do): the batch keeps it until the flush, and a string aliasing a
// record would keep the whole fetch buffer the record was decoded from.
func keepRated(p *contract.Rated) contract.Rated {
	r := *p
	keepStrings(&r.UsageID, &r.MeteringSource, &r.MeteringID, &r.UnitID, &r.Quantity, &r.UnitPrice, &r.Amount, &r.Currency, &r.TenantID, &r.ProductID)
	return r
}
