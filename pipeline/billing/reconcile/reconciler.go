package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
	"github.com/driftline/driftline/pipeline/stream/retry"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

// Sink is where the reconciler writes mismatches and rated lines.
type Sink interface {
	Write(ctx context.Context, b *Batch) error
}

// Options configure a Reconciler.
type Options struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Prices is the price book unknown_unit is judged against: the same
	// file the rater loads. Required.
	Prices *pricebook.Store
	// Group is the consumer group all billing reconcilers share. Default
	// "driftline-billing".
	Group string
	// Topics names the topics. Default contract.DefaultTopics().
	Topics contract.Topics
	// Environment is the pipeline's environment; events for another are
	// invalid. Default local_parity.
	Environment string
	// Rules holds the event-time windows. Default DefaultRules().
	Rules Rules
	// FlushInterval bounds how long processed events wait before their
	// rows are written and their offsets committed. Default 500ms.
	FlushInterval time.Duration
	// FlushEvents flushes once this many events were processed. Default
	// 50000.
	FlushEvents int
	// CatchUpInterval and CatchUpEvents bound a round instead while the
	// reconciler is behind by more than FlushEvents records (see
	// logmerge.Rounds): fewer, larger writes while it catches up.
	// Defaults 3s and 500000; a negative CatchUpInterval, or one not above
	// FlushInterval, turns catching up off.
	CatchUpInterval time.Duration
	CatchUpEvents   int
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the reconciler's metrics. Default none.
	Registerer prometheus.Registerer
	// QueueRecords bounds the records a stream of one partition may hold
	// in its merge while it waits for an earlier stream (usage already
	// fetched while the rater is still producing the rated lines before
	// it): at that many the stream's fetching pauses until the merge has
	// drained it to a quarter (logmerge.Throttle). Default 16384.
	QueueRecords int
	// ClientOpts are extra franz-go options (tests, TLS, SASL).
	ClientOpts []kgo.Opt
}

func (o *Options) defaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("billing: no brokers")
	}
	if o.Prices == nil {
		return errors.New("billing: no price book")
	}
	if o.Group == "" {
		o.Group = "driftline-billing"
	}
	if o.Topics == (contract.Topics{}) {
		o.Topics = contract.DefaultTopics()
	}
	if o.Environment == "" {
		o.Environment = contract.EnvLocalParity
	}
	o.Rules.defaults()
	if o.FlushInterval <= 0 {
		o.FlushInterval = 500 * time.Millisecond
	}
	if o.FlushEvents <= 0 {
		o.FlushEvents = 50000
	}
	if o.CatchUpInterval == 0 {
		o.CatchUpInterval = 3 * time.Second
	}
	if o.CatchUpEvents <= 0 {
		o.CatchUpEvents = 500_000
	}
	if o.QueueRecords <= 0 {
		o.QueueRecords = 16384
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Reconciler is one member of the billing reconciler consumer group.
type Reconciler struct {
	opts      Options
	sink      Sink
	m         *metrics
	validator contract.Validator
	adm       *kadm.Client
	cl        *kgo.Client

	// partitions is the partition count of the billing topics, for the
	// mis-partitioning check.
	partitions int32

	// mu protects parts and out: the poll loop holds it while it applies
	// and flushes; the group callbacks hold it while they restore or drop
	// partitions.
	mu    sync.Mutex
	parts map[int32]*partition
	out   output
	// flow pauses streams that ran ahead in their merges (throttle).
	flow logmerge.Throttle
	// rounds sizes the poll loop's rounds; backlog is the owned
	// partitions' records not applied yet, as of the last poll (read and
	// written by the poll loop only).
	rounds  logmerge.Rounds
	backlog int64
	// left is why the member left the group on its own (a restore that
	// kept failing); Run returns it.
	left error
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
	// pruned and late are the tracker's counts already added to the
	// metrics.
	pruned, late int64
}

// output collects what a batch of records produces.
type output struct {
	batch   Batch
	current map[string]int // mismatch_id -> index in batch.Mismatches
	m       *metrics
	emit    bool // false while restoring: the rows are already written
}

func (o *output) add(m *Mismatch) {
	if !o.emit {
		return
	}
	o.m.transitions.WithLabelValues(string(m.Kind), string(m.Status)).Inc()
	if i, ok := o.current[m.MismatchID]; ok {
		o.batch.Mismatches[i] = *m
		return
	}
	o.current[m.MismatchID] = len(o.batch.Mismatches)
	o.batch.Mismatches = append(o.batch.Mismatches, *m)
}

func (o *output) reset() {
	o.batch.Reset()
	clear(o.current)
}

// New connects to the brokers and returns a Reconciler writing to s.
func New(ctx context.Context, opts Options, s Sink) (*Reconciler, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &Reconciler{
		opts:      opts,
		sink:      s,
		m:         newMetrics(opts.Registerer),
		validator: contract.Validator{Environment: opts.Environment},
		parts:     map[int32]*partition{},
		flow:      logmerge.NewThrottle(opts.QueueRecords),
		rounds: logmerge.Rounds{Interval: opts.FlushInterval, Records: opts.FlushEvents,
			CatchUpInterval: opts.CatchUpInterval, CatchUpRecords: opts.CatchUpEvents},
	}
	r.out = output{current: map[string]int{}, m: r.m, emit: true}
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...)}, opts.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("billing: admin client: %w", err)
	}
	r.adm = kadm.NewClient(admCl)
	if err := topics.CheckCopartitioned(ctx, r.adm, opts.Topics); err != nil {
		r.adm.Close()
		return nil, fmt.Errorf("billing: %w", err)
	}
	if r.partitions, err = topics.PartitionCount(ctx, r.adm, opts.Topics.Usage); err != nil {
		r.adm.Close()
		return nil, fmt.Errorf("billing: %w", err)
	}
	copts := append([]kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.ConsumerGroup(opts.Group),
		kgo.ConsumeTopics(opts.Topics.Billing()...),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(logmerge.FetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	}, opts.ClientOpts...)
	if r.cl, err = kgo.NewClient(copts...); err != nil {
		r.adm.Close()
		return nil, fmt.Errorf("billing: consumer: %w", err)
	}
	return r, nil
}

// Run consumes until ctx is done or the client is closed. Each round polls
// for up to FlushInterval or FlushEvents (longer while it catches up: see
// logmerge.Rounds), applies the records, writes the rows, commits the
// offsets, and only then lets a rebalance proceed.
func (r *Reconciler) Run(ctx context.Context) error {
	defer r.adm.Close()
	defer r.cl.Close()
	for ctx.Err() == nil {
		catchUp, backlog, closed := r.rounds.Round(ctx, r.cl, r.backlog, func(fetches kgo.Fetches) (int, int64) {
			r.mu.Lock()
			defer r.mu.Unlock()
			logmerge.Fetched(fetches,
				func(t string, p int32, recs []*kgo.Record, unfetched int64) {
					if part := r.parts[p]; part != nil {
						part.merge.Push(r.stream(t), recs, unfetched)
					}
				},
				func(t string, p int32, err error) {
					r.opts.Logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
				})
			n := r.applyAll(r.parts)
			r.throttle()
			backlog := logmerge.BacklogAll(r.parts, func(p *partition) *logmerge.Merge { return &p.merge })
			r.m.backlog.Set(float64(backlog))
			return n, backlog
		})
		if closed {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.left
		}
		r.backlog = backlog
		if catchUp {
			r.m.catchUpRounds.Inc()
		}
		r.mu.Lock()
		err := r.flushAndCommit(ctx)
		r.mu.Unlock()
		r.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
	return nil
}

// flushAndCommit writes the pending batch (retrying until it succeeds or
// ctx ends; on shutdown for a bounded time) and then commits the offsets
// of everything applied. mu is held.
func (r *Reconciler) flushAndCommit(ctx context.Context) error {
	wctx, giveUp, cancel := retry.FlushContext(ctx)
	defer cancel()
	dirty := false
	for _, part := range r.parts {
		if part.dirty {
			r.observe(part)
			part.dirty, dirty = false, true
		}
		part.tracker.TakeWindows(func(w *Window) { r.out.batch.Windows = append(r.out.batch.Windows, *w) })
	}
	if !dirty && r.out.batch.Empty() {
		return nil
	}
	if !r.out.batch.Empty() {
		err := retry.Until(giveUp, r.opts.Logger, "write billing rows to ClickHouse", func() error {
			start := time.Now()
			if err := r.sink.Write(wctx, &r.out.batch); err != nil {
				r.m.flushErrors.Inc()
				return err
			}
			r.m.flushSeconds.Observe(time.Since(start).Seconds())
			return nil
		})
		if err != nil {
			return err
		}
		r.out.reset()
	}
	r.commit(wctx)
	return nil
}

// applyAll applies, per partition, what its merge can release, and
// returns the number of records applied. mu is held (or parts is a
// restore's own).
func (r *Reconciler) applyAll(parts map[int32]*partition) int {
	n := 0
	for _, part := range parts {
		for rec, _ := part.merge.Pop(); rec != nil; rec, _ = part.merge.Pop() {
			r.apply(parts, rec)
			n++
		}
	}
	return n
}

// commit commits the offsets of everything applied: the merges'
// positions, not the fetch positions, since polled records may wait in a
// merge. The rows are written by then; a failed commit means a replay of
// the batch, which writes the same rows again. mu is held.
func (r *Reconciler) commit(ctx context.Context) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	names := r.streamTopics()
	for p, part := range r.parts {
		for s, next := range part.merge.Next {
			if next.Offset > part.merge.Committed[s] {
				if offsets[names[s]] == nil {
					offsets[names[s]] = map[int32]kgo.EpochOffset{}
				}
				offsets[names[s]][p] = next
			}
		}
	}
	if len(offsets) == 0 {
		return
	}
	if failed := logmerge.Commit(ctx, r.cl, offsets); failed != nil {
		r.opts.Logger.Warn("offset commit failed; the batch will be replayed idempotently", "err", failed)
		return
	}
	for t, ps := range offsets {
		s := r.stream(t)
		for p, next := range ps {
			if part := r.parts[p]; part != nil {
				part.merge.Committed[s] = next.Offset
			}
		}
	}
}

func (r *Reconciler) newPartition(p int32, out *output) *partition {
	part := &partition{p: p, label: strconv.Itoa(int(p)), out: out, merge: logmerge.NewMerge(numStreams)}
	part.tracker = NewTracker(r.opts.Rules, r.opts.Prices.Book, func(m *Mismatch) { part.out.add(m) })
	part.tracker.SetPartition(p)
	return part
}

// apply decodes one record and applies it to the partition its key hashes
// to when parts holds it (a producer that bypassed the standard
// partitioner is corrected here and counted), else to the partition it
// arrived on.
func (r *Reconciler) apply(parts map[int32]*partition, rec *kgo.Record) {
	part := parts[rec.Partition]
	if r.partitions > 0 && rec.Key != nil {
		if want := contract.Partition(rec.Key, r.partitions); want != rec.Partition {
			r.m.mispartitioned.WithLabelValues(rec.Topic).Inc()
			if p := parts[want]; p != nil {
				part = p
			}
		}
	}
	part.dirty = true
	if rec.Value == nil {
		r.m.invalid.WithLabelValues("tombstone").Inc()
		return
	}
	env, payload, verr := r.validator.DecodeEvent(rec.Value)
	if verr != nil {
		// The gateway and the rater validate what they write; a record
		// that still fails was written around them. It changes nothing.
		r.m.invalid.WithLabelValues(string(verr.Reason)).Inc()
		r.opts.Logger.Debug("invalid record", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", verr)
		return
	}
	r.m.events.WithLabelValues(rec.Topic).Inc()
	at := env.OccurredAt.UTC()
	t := part.tracker
	switch p := payload.(type) {
	case *contract.Usage:
		t.ApplyUsage(p, at)
	case *contract.Rated:
		if t.ApplyRated(p, at) && part.out.emit {
			part.out.batch.Rated = append(part.out.batch.Rated, *p)
		}
	case *contract.LedgerEntry:
		t.ApplyLedger(p, at)
	default:
		t.Advance(at)
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

// assigned restores the state of newly assigned partitions.
func (r *Reconciler) assigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var fresh []int32
	seen := map[int32]bool{}
	for _, ps := range assigned {
		for _, p := range ps {
			if r.parts[p] == nil && !seen[p] {
				seen[p] = true
				fresh = append(fresh, p)
			}
		}
	}
	if len(fresh) == 0 {
		return
	}
	start := time.Now()
	var restored map[int32]*partition
	err := retry.Restore(ctx, retry.RestoreTimeout, r.opts.Logger, "restore billing partitions", func() (err error) {
		restored, err = r.restore(ctx, fresh)
		return err
	})
	if err != nil {
		// Without its state the worker would raise wrong mismatches:
		// leave the group loudly rather than guess.
		r.opts.Logger.Error("restore failed; leaving the group", "partitions", fresh, "err", err)
		r.left = fmt.Errorf("billing: left the group: partitions %v not restored: %w", fresh, err)
		go r.cl.Close()
		return
	}
	for p, part := range restored {
		r.parts[p] = part
		r.observe(part)
	}
	r.m.assigned.Set(float64(len(r.parts)))
	r.m.restoreSeconds.Observe(time.Since(start).Seconds())
	r.opts.Logger.Info("billing partitions assigned", "partitions", fresh, "restore", time.Since(start).Round(time.Millisecond))
}

// throttle pauses the streams that ran ahead in their merges and resumes
// those drained again (logmerge.Throttle). mu is held.
func (r *Reconciler) throttle() {
	names := r.streamTopics()
	paused, _ := logmerge.ThrottleAll(&r.flow, r.cl, names[:], r.parts, func(p *partition) logmerge.Streams { return p.merge.Streams() })
	r.m.pauses.Add(float64(paused))
}

// revoked drops revoked partitions. Everything applied was flushed and
// committed before the rebalance was allowed. Their fetching is resumed:
// a client keeps paused partitions paused across rebalances.
func (r *Reconciler) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cl.ResumeFetchPartitions(revoked)
	for _, ps := range revoked {
		for _, p := range ps {
			delete(r.parts, p)
			for _, g := range []*prometheus.GaugeVec{r.m.open, r.m.watermark, r.m.trackedUsage, r.m.trackedWindows} {
				g.DeleteLabelValues(strconv.Itoa(int(p)))
			}
		}
	}
	r.m.assigned.Set(float64(len(r.parts)))
}

func (r *Reconciler) lost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	r.revoked(ctx, cl, lost)
}
