// Package rater prices usage.events against the versioned price book and
// writes one billing.rated line per usage_id (CONTRACT 3.5, 3.7, 5).
//
// Exactly-once: the rater is a consume-transform-produce loop in Kafka
// transactions (franz-go's GroupTransactSession). Each round polls a batch
// of usage records, writes their rated lines and quarantine records, and
// commits the consumer offsets in the same transaction. A crash at any
// point aborts the open transaction (the restarted rater fences it by
// initialising the same transactional id), and the batch is consumed again
// from the committed offsets, so a read_committed consumer of
// billing.rated sees each rated line once. Rebalances abort the round in
// progress for the same reason. A transaction whose end does not reach the
// broker (one restarting under it) has an unknown outcome: the rater then
// starts over in the same process as a restarted one would
// (stream.ErrRejoin), with a new session and its state restored.
//
// Kafka transactions make each usage *record* count once; usage events can
// also be in usage.events twice (an at-least-once producer redelivering).
// The rater therefore remembers, per usage key, the usage_id that first
// claimed it: a redelivered usage_id changes nothing, and a second usage_id
// of the same key is duplicate_usage (quarantined, not rated). That state
// is bounded by an event-time horizon (usage older than it is quarantined
// as late_event), rebuilt on assignment by replaying the partition's usage
// records below the committed offset through the same checks, and what a
// transaction adds is undone when it aborts (state.go).
//
// A round's records are decoded, rated and encoded in parallel, then
// checked against the key state and produced in their order by the loop
// alone (prepare.go).
//
// Usage that cannot be rated exactly is never guessed at: an unknown or
// retired unit, a negative or inexact quantity, a currency the rater may
// not bill, an amount out of range, and invalid events go to
// ingest.quarantine with a reason (contract.RatingReasons), in the same transaction,
// and are counted.
//
// With transactions off (Options.DisableTransactions) the loop is the same
// but at-least-once: produce, flush, then commit offsets. It exists to
// measure the cost of transactions, not for production.
package rater

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream"
)

// Rater is one member of the rater consumer group: the processor of a
// stream.Member (see member.go).
type Rater struct {
	opts Options
	m    *metrics
	// decoder is the restore's: its payloads and their
	// strings (ZeroCopy) live only while one record is processed.
	decoder    *contract.Decoder
	currencies map[string]bool
	member     *stream.Member
	partitions int32 // partition count of the billing topics

	// The member's lock protects state and round: its poll loop holds it
	// while it processes a batch and ends its transaction, its group
	// callbacks while they restore or drop partitions.
	state *keyState
	// round is the batch in progress, between Apply and Flush; nil
	// between rounds.
	round *round
	// ratedAt is the round's rated_at, formatted once.
	ratedAt []byte
	// keyBuf is the restore's usage key, and the key it claims when that
	// is another (usageEvent.setClaim).
	keyBuf []byte
	// preparers are prepare's workers, each with its decoder and arena.
	preparers []*preparer
	// in, prepared and spareRecs are reused from round to round: the
	// records of a round, their preparation, and the slab of the rated
	// records of the last round once it is flushed.
	in        []*kgo.Record
	prepared  []prepared
	spareRecs []kgo.Record
	// gc paces the collector after each transaction (Options.GCHeadroom).
	gc service.GCPacer
}

// New connects to the brokers and returns a Rater. With transactions on,
// it initialises its transactional id before joining the group, which
// fences and aborts the open transaction of a crashed predecessor.
func New(ctx context.Context, opts Options) (*Rater, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &Rater{
		opts:    opts,
		gc:      service.GCPacer{Headroom: opts.GCHeadroom},
		m:       newMetrics(opts.Registerer),
		decoder: contract.NewDecoder(contract.Validator{Environment: opts.Environment, ZeroCopy: true}),
		state:   newKeyState(opts.Horizon),
	}
	if len(opts.Currencies) > 0 {
		r.currencies = map[string]bool{}
		for _, c := range opts.Currencies {
			r.currencies[c] = true
		}
	}
	r.m.bookUnits.Set(float64(opts.Prices.Book().Units()))
	mopts := opts.Member("rater", []string{opts.Topics.Usage})
	// A rater's state is per usage partition and a restore replays the
	// partition from its start: cooperative rebalancing moves only the
	// partitions that change owner.
	mopts.Balancer = kgo.CooperativeStickyBalancer()
	mopts.PollRecords, mopts.TransactionTimeout = opts.MaxBatch, opts.TransactionTimeout
	// A round produces at most one record per record polled: with room
	// for them all, Produce never blocks on the broker's acks mid-round
	// (the round waits once, in its flush).
	mopts.ConsumerOpts = append(mopts.ConsumerOpts,
		kgo.ProducerBatchCompression(opts.codec()),
		kgo.MaxBufferedRecords(max(opts.MaxBatch, 50000)))
	if !opts.DisableTransactions {
		mopts.TransactionalID = opts.TransactionalID
	}
	if opts.InstanceID != "-" {
		mopts.InstanceID = opts.InstanceID
	}
	var err error
	if r.member, err = stream.NewMember(ctx, mopts); err != nil {
		return nil, err
	}
	r.partitions = r.member.Partitions()
	if err := r.member.Join(ctx, (*processor)(r)); err != nil {
		return nil, err
	}
	return r, nil
}

// WatchPrices counts the price book's reloads in the rater's metrics; call
// it before starting Store.Watch.
func (r *Rater) WatchPrices() {
	r.opts.Prices.OnReload = func(b *pricebook.Book, err error) {
		if err != nil {
			r.m.bookReloads.WithLabelValues("refused").Inc()
			return
		}
		r.m.bookReloads.WithLabelValues("applied").Inc()
		r.m.bookUnits.Set(float64(b.Units()))
	}
}

// Run rates until ctx is done or a non-retryable Kafka error occurs. A
// round in progress when ctx ends is finished (committed or aborted)
// within a bounded time, so a clean stop leaves nothing open.
func (r *Rater) Run(ctx context.Context) error { return r.member.Run(ctx) }

// outcome counts one round's results, applied to metrics on commit.
type outcome struct {
	rated, redelivered int
	quarantined        map[contract.Reason]int
	// mispartitioned counts the usage records whose key does not hash to
	// their partition or is not the usage key; rerouted, those of them
	// copied to the key's partition (reroute).
	mispartitioned, rerouted int
}

// round is one batch in its transaction: its records processed and their
// rated lines and quarantine records produced (begin), then flushed and
// committed with the batch's offsets, or aborted (end).
type round struct {
	start   time.Time
	records int
	// ctx bounds producing and ending the transaction; a stop does not
	// cut it, so the round ends (commits or aborts) cleanly.
	ctx    context.Context
	cancel context.CancelFunc
	// err is why the transaction could not begin.
	err        error
	produceErr atomic.Pointer[error]
	out        outcome
	// recs is the slab of the round's rated records.
	recs []kgo.Record
}

// roundTimeout bounds producing and ending one round's transaction.
const roundTimeout = 30 * time.Second

// begin starts a round: it begins the transaction and produces the
// outputs of the records of fetches. The member's lock is held.
func (r *Rater) begin(ctx context.Context, fetches kgo.Fetches) {
	if r.round != nil {
		panic("BUG: rater: a round began before the last one ended")
	}
	rd := &round{start: time.Now(), records: fetches.NumRecords(), out: outcome{quarantined: map[contract.Reason]int{}}}
	rd.ctx, rd.cancel = context.WithTimeout(context.WithoutCancel(ctx), roundTimeout)
	r.round = rd
	if sess := r.member.Session(); sess != nil {
		if err := sess.Begin(); err != nil {
			rd.err = fmt.Errorf("begin transaction: %w", err)
			return
		}
	}
	var (
		cl      = r.member.Client()
		promise = func(_ *kgo.Record, err error) {
			if err != nil {
				rd.produceErr.CompareAndSwap(nil, &err)
			}
		}
		book = r.opts.Prices.Book()
		now  = r.opts.Now()
	)
	// The rated lines, their keys and records are carved from the
	// preparers' arenas and the round's slab: the client holds them until
	// the round's flush, after which the next round reuses them.
	r.ratedAt = now.UTC().AppendFormat(r.ratedAt[:0], ratedAtLayout)
	rd.recs, r.spareRecs = r.spareRecs, nil
	if cap(rd.recs) < rd.records {
		rd.recs = make([]kgo.Record, 0, rd.records)
	}
	in := r.in[:0]
	fetches.EachRecord(func(rec *kgo.Record) { in = append(in, rec) })
	if cap(r.prepared) < len(in) {
		r.prepared = make([]prepared, len(in))
	}
	ps := r.prepared[:len(in)]
	r.prepare(in, ps, book)
	for i := range ps {
		if o := r.decide(&ps[i], rd); o != nil {
			cl.Produce(rd.ctx, o, promise)
		}
	}
	// Drop the references to this round's records until the next one.
	clear(in)
	clear(ps)
	r.in = in[:0]
}

// end ends the round's transaction: it commits the outputs with the
// offsets of the batch, or aborts them if a produce failed or the group
// rebalanced; the key state follows. The member's lock is held.
func (r *Rater) end() error {
	rd := r.round
	if rd == nil {
		return nil
	}
	r.round = nil
	defer rd.cancel()
	if rd.err != nil {
		return rd.err
	}
	// Flush first so a failed produce aborts rather than commits.
	if err := r.member.Client().Flush(rd.ctx); err != nil {
		// The client may still hold records carved from the arenas.
		for _, p := range r.preparers {
			p.arena = nil
		}
		return fmt.Errorf("flush: %w", err)
	}
	// Every record of the round is finished: the client no longer reads
	// their memory.
	r.spareRecs = rd.recs[:0]
	for _, p := range r.preparers {
		p.arena = p.arena[:0]
	}
	committed := false
	if sess := r.member.Session(); sess != nil {
		try := kgo.TryCommit
		if p := rd.produceErr.Load(); p != nil {
			r.opts.Logger.Warn("produce failed; aborting the transaction, the batch will be rated again", "err", *p)
			try = kgo.TryAbort
		}
		var err error
		committed, err = sess.End(rd.ctx, try)
		if err != nil {
			r.state.abort()
			if fenced(err) {
				return fmt.Errorf("end transaction: %w", err)
			}
			// The end did not reach the broker (one restarting, say):
			// the outcome is unknown and the session cannot go on. The
			// member starts over as a restarted rater would, its key
			// state restored from what was committed.
			return fmt.Errorf("end transaction: %w: %w", stream.ErrRejoin, err)
		}
	} else {
		if p := rd.produceErr.Load(); p != nil {
			r.state.abort()
			return fmt.Errorf("produce: %w", *p)
		}
		if err := r.member.Client().CommitUncommittedOffsets(rd.ctx); err != nil {
			r.opts.Logger.Warn("offset commit failed; the batch will be rated again (at-least-once mode)", "err", err)
		}
		committed = true
	}
	if !committed {
		r.m.txns.WithLabelValues("aborted").Inc()
		r.state.abort()
		return nil
	}
	r.state.commit()
	r.setKeys()
	r.m.txns.WithLabelValues("committed").Inc()
	r.m.usage.WithLabelValues("rated").Add(float64(rd.out.rated))
	r.m.usage.WithLabelValues("redelivery").Add(float64(rd.out.redelivered))
	for reason, n := range rd.out.quarantined {
		r.m.usage.WithLabelValues("quarantined").Add(float64(n))
		r.m.quarantined.WithLabelValues(string(reason)).Add(float64(n))
	}
	r.m.mispartitioned.Add(float64(rd.out.mispartitioned))
	r.m.usage.WithLabelValues("rerouted").Add(float64(rd.out.rerouted))
	r.m.batchSeconds.Observe(time.Since(rd.start).Seconds())
	r.m.batchEvents.Observe(float64(rd.records))
	return nil
}

// decide turns one prepared usage record into its rated line or
// quarantine record (nil for a redelivery), checking it against the key
// state. Rated records are carved from the round's slab. The member's
// lock is held.
func (r *Rater) decide(p *prepared, rd *round) *kgo.Record {
	rec, out := p.rec, &rd.out
	switch {
	case p.verr != nil:
		return r.quarantine(rec, "", p.verr.Reason, p.verr.Field, p.verr.Detail, out)
	case p.notUsage:
		return r.quarantine(rec, p.eventID, contract.ReasonWrongEventType, "event_type", p.eventType+" on the usage topic", out)
	}
	e := &p.e
	if p.misrouted {
		out.mispartitioned++
		if e.part != rec.Partition {
			return r.reroute(p, rd)
		}
	}
	switch v, first, floor := r.state.check(e); v {
	case verdictRedelivery:
		out.redelivered++
		return nil
	case verdictConflict:
		return r.quarantine(rec, p.eventID, contract.ReasonConflictingDuplicate, "payload.usage_id",
			fmt.Sprintf("usage_id %s was rated before with payload digest %s, this payload's is %s: the first stays rated", first.usageID, first.digest, e.digest), out)
	case verdictDuplicate:
		return r.quarantine(rec, p.eventID, contract.ReasonDuplicateUsage, "payload.metering_id",
			fmt.Sprintf("usage key %s is already claimed by usage_id %s", e.key, first.usageID), out)
	case verdictNotOwned:
		// Not for a usage of another partition, which is rerouted
		// above; kept for a state that does not hold the partition.
		return r.quarantine(rec, p.eventID, contract.ReasonNotOwned, "",
			fmt.Sprintf("usage key %s hashes to partition %d, which another rater owns", e.key, e.part), out)
	case verdictLate:
		return r.quarantine(rec, p.eventID, contract.ReasonLate, "occurred_at",
			fmt.Sprintf("usage occurred at %s, before partition %d's watermark less the rater's horizon (%s): its usage key may be forgotten, so it is not rated",
				p.occurred.UTC().Format(time.RFC3339Nano), e.part, time.Unix(0, floor).UTC().Format(time.RFC3339Nano)), out)
	}
	if p.rating.Reason != "" {
		return r.quarantine(rec, p.eventID, p.rating.Reason, "", p.rating.Detail, out)
	}
	out.rated++
	rd.recs = append(rd.recs, kgo.Record{
		Topic:   r.opts.Topics.Rated,
		Key:     e.key,
		Value:   p.value,
		Headers: ratedHeaders,
	})
	return &rd.recs[len(rd.recs)-1]
}

// reroute returns the copy of a usage record that arrived on a partition
// its usage key does not hash to, for the partition it does: it is rated
// there, by that partition's owner, as any usage of the key is. The copy
// is produced in the round's transaction, so the original's offset is
// committed exactly when the copy is written; it keeps the original's
// value (its event_id and digest), so a redelivery of the event to the
// right partition is a redelivery of the copy. Rating the original here
// instead would leave its claim in a partition whose log does not hold
// it: the owner after a rebalance, restoring the key's partition from its
// log alone, would rate a redelivery again; and a rater owning only the
// original's partition could not rate it at all.
func (r *Rater) reroute(p *prepared, rd *round) *kgo.Record {
	rec := p.rec
	headers := append(rec.Headers[:len(rec.Headers):len(rec.Headers)], kgo.RecordHeader{Key: contract.HeaderReroutedFrom,
		Value: fmt.Appendf(nil, "%s/%d/%d", rec.Topic, rec.Partition, rec.Offset)})
	rd.out.rerouted++
	rd.recs = append(rd.recs, kgo.Record{
		Topic:     r.opts.Topics.Usage,
		Key:       p.e.key, // the client's partitioner is murmur2's, as contract.Partition
		Value:     rec.Value,
		Headers:   headers,
		Timestamp: rec.Timestamp,
	})
	return &rd.recs[len(rd.recs)-1]
}

// ratedHeaders are the headers of every rated line; the client only reads
// them.
var ratedHeaders = systemHeaders("")

func (r *Rater) quarantine(rec *kgo.Record, eventID string, reason contract.Reason, field, detail string, out *outcome) *kgo.Record {
	doc := contract.Quarantined{
		Reason: reason, Field: field, Detail: detail, EventID: eventID,
		ActorID: ActorID, SourceType: contract.SourceSystem,
		ReceivedAt: r.opts.Now().UTC().Format(time.RFC3339Nano),
	}
	doc.SetLine(rec.Value, contract.DefaultQuarantineLineLimit)
	doc.SetSource(rec.Topic, rec.Partition, rec.Offset)
	v, err := json.Marshal(doc)
	if err != nil {
		panic("BUG: quarantine value does not encode: " + err.Error())
	}
	out.quarantined[reason]++
	return &kgo.Record{Topic: r.opts.Topics.Quarantine, Key: rec.Key, Value: v, Headers: systemHeaders(reason)}
}

// setKeys sets the gauges of the usage keys remembered.
func (r *Rater) setKeys() {
	r.m.keys.Set(float64(r.state.keys()))
	r.m.keyBytes.Set(float64(r.state.bytes()))
}

func systemHeaders(reason contract.Reason) []kgo.RecordHeader {
	h := []kgo.RecordHeader{
		{Key: contract.HeaderActorID, Value: []byte(ActorID)},
		{Key: contract.HeaderSourceType, Value: []byte(contract.SourceSystem)},
	}
	if reason != "" {
		h = append(h, kgo.RecordHeader{Key: contract.HeaderReason, Value: []byte(reason)})
	}
	return h
}

// fenced reports whether err says another producer took the rater's
// transactional id over: starting over would fence it in turn.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}
