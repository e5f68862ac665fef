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
// progress for the same reason.
//
// Kafka transactions make each usage *record* count once; usage events can
// also be in usage.events twice (an at-least-once producer redelivering).
// The rater therefore remembers, per usage key, the usage_id that first
// claimed it: a redelivered usage_id changes nothing, and a second usage_id
// of the same key is duplicate_usage (quarantined, not rated). That state
// is rebuilt on assignment by replaying the partition's usage records below
// the committed offset, and updated only when a transaction commits.
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
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

// Options configure a Rater.
type Options struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Prices is the price book in use. Required.
	Prices *pricebook.Store
	// Group is the consumer group of all raters. Default "driftline-rater".
	Group string
	// TransactionalID identifies this rater's transactions. It must be
	// stable across restarts of one instance (so a restart fences the
	// crashed incarnation) and distinct between instances running at
	// once. Default "driftline-rater".
	TransactionalID string
	// InstanceID is the static group membership id (group.instance.id).
	// A restarted instance with the same id takes over its partitions at
	// once, instead of waiting for the crashed member's session to time
	// out. Default: TransactionalID. Set "-" for dynamic membership.
	InstanceID string
	// DisableTransactions rates at-least-once without transactions, to
	// measure their overhead. Default false (transactions on).
	DisableTransactions bool
	// TransactionTimeout bounds how long a crashed rater's open
	// transaction can hold back read_committed consumers if it is not
	// fenced by a restart. Default 10s.
	TransactionTimeout time.Duration
	// Topics names the topics. Default contract.DefaultTopics().
	Topics contract.Topics
	// Environment is the pipeline's environment, stamped on rated lines;
	// usage for another is quarantined. Default local_parity.
	Environment string
	// Currencies, when not empty, are the only currencies the rater may
	// bill; usage of a unit priced in another is quarantined
	// (currency_not_allowed). Default: any currency the price book names.
	Currencies []string
	// MaxBatch bounds the records of one transaction. Larger batches
	// amortise the commit; smaller ones redo less after a crash. Default
	// 10000.
	MaxBatch int
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the rater's metrics. Default none.
	Registerer prometheus.Registerer
	// ClientOpts are extra franz-go options (tests, TLS, SASL).
	ClientOpts []kgo.Opt
	// Now is the clock of rated_at. Default time.Now.
	Now func() time.Time
}

func (o *Options) defaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("rater: no brokers")
	}
	if o.Prices == nil {
		return errors.New("rater: no price book")
	}
	if o.Group == "" {
		o.Group = "driftline-rater"
	}
	if o.TransactionalID == "" {
		o.TransactionalID = "driftline-rater"
	}
	if o.InstanceID == "" {
		o.InstanceID = o.TransactionalID
	}
	if o.TransactionTimeout <= 0 {
		o.TransactionTimeout = 10 * time.Second
	}
	if o.Topics == (contract.Topics{}) {
		o.Topics = contract.DefaultTopics()
	}
	if o.Environment == "" {
		o.Environment = contract.EnvLocalParity
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 10000
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// consumer is what the loop needs of the Kafka client: the transact
// session, or a plain group client when transactions are off.
type consumer interface {
	PollRecords(ctx context.Context, n int) kgo.Fetches
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	AllowRebalance()
	Close()
}

// Rater is one member of the rater consumer group.
type Rater struct {
	opts      Options
	m         *metrics
	validator contract.Validator // the restore's: payloads it keeps are its own
	// decoder is the loop's (mu held): its payloads and their strings
	// (ZeroCopy) live only while one record is processed.
	decoder    *contract.Decoder
	currencies map[string]bool
	adm        *kadm.Client
	sess       *kgo.GroupTransactSession // nil without transactions
	cl         *kgo.Client               // the session's client, or the plain client
	consumer   consumer
	partitions int32 // partition count of the billing topics

	// mu protects state: the loop holds it while it processes a batch and
	// applies its outcome; the group callbacks while they restore or drop
	// partitions.
	mu    sync.Mutex
	state *keyState
	// left is why the member left the group on its own (a restore that
	// kept failing); Run returns it. mu protects it.
	left error
}

// New connects to the brokers and returns a Rater. With transactions on,
// it initialises its transactional id before joining the group, which
// fences and aborts the open transaction of a crashed predecessor.
func New(ctx context.Context, opts Options) (*Rater, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &Rater{
		opts:      opts,
		m:         newMetrics(opts.Registerer),
		validator: contract.Validator{Environment: opts.Environment},
		decoder:   contract.NewDecoder(contract.Validator{Environment: opts.Environment, ZeroCopy: true}),
		state:     newKeyState(),
	}
	if len(opts.Currencies) > 0 {
		r.currencies = map[string]bool{}
		for _, c := range opts.Currencies {
			r.currencies[c] = true
		}
	}
	r.m.bookUnits.Set(float64(opts.Prices.Book().Units()))
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...)}, opts.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("rater: admin client: %w", err)
	}
	r.adm = kadm.NewClient(admCl)
	fail := func(err error) (*Rater, error) {
		r.adm.Close()
		return nil, fmt.Errorf("rater: %w", err)
	}
	if err := topics.CheckCopartitioned(ctx, r.adm, opts.Topics); err != nil {
		return fail(err)
	}
	if r.partitions, err = topics.PartitionCount(ctx, r.adm, opts.Topics.Usage); err != nil {
		return fail(err)
	}
	copts := append([]kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.ConsumerGroup(opts.Group),
		kgo.ConsumeTopics(opts.Topics.Usage),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.revoked),
	}, opts.ClientOpts...)
	if opts.InstanceID != "-" {
		copts = append(copts, kgo.InstanceID(opts.InstanceID))
	}
	if opts.DisableTransactions {
		if r.cl, err = kgo.NewClient(copts...); err != nil {
			return fail(fmt.Errorf("consumer: %w", err))
		}
		r.consumer = r.cl
		return r, nil
	}
	copts = append(copts,
		kgo.TransactionalID(opts.TransactionalID),
		kgo.TransactionTimeout(opts.TransactionTimeout),
	)
	if r.sess, err = kgo.NewGroupTransactSession(copts...); err != nil {
		return fail(fmt.Errorf("transact session: %w", err))
	}
	r.cl = r.sess.Client()
	r.consumer = r.sess
	if _, _, err := r.cl.ProducerID(ctx); err != nil {
		r.sess.Close()
		return fail(fmt.Errorf("init transactional id %q: %w", opts.TransactionalID, err))
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
func (r *Rater) Run(ctx context.Context) error {
	defer r.adm.Close()
	defer r.consumer.Close()
	for ctx.Err() == nil {
		fetches := r.consumer.PollRecords(ctx, r.opts.MaxBatch)
		if fetches.IsClientClosed() {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.left
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				r.opts.Logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		if fetches.NumRecords() == 0 {
			r.consumer.AllowRebalance()
			continue
		}
		err := r.round(ctx, fetches)
		r.consumer.AllowRebalance()
		if err != nil {
			return err
		}
	}
	return nil
}

// outcome counts one round's results, applied to metrics on commit.
type outcome struct {
	rated, redelivered int
	quarantined        map[contract.Reason]int
	mispartitioned     int
}

// round rates one batch and ends its transaction.
func (r *Rater) round(ctx context.Context, fetches kgo.Fetches) error {
	start := time.Now()
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if r.sess != nil {
		if err := r.sess.Begin(); err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
	}
	var (
		produceErr atomic.Pointer[error]
		promise    = func(_ *kgo.Record, err error) {
			if err != nil {
				produceErr.CompareAndSwap(nil, &err)
			}
		}
		out   = outcome{quarantined: map[contract.Reason]int{}}
		book  = r.opts.Prices.Book()
		now   = r.opts.Now()
		arena = make([]byte, 0, 512*fetches.NumRecords())
	)
	r.mu.Lock()
	fetches.EachRecord(func(rec *kgo.Record) {
		var o *kgo.Record
		o, arena = r.process(rec, book, now, arena, &out)
		if o != nil {
			r.consumer.Produce(endCtx, o, promise)
		}
	})
	r.mu.Unlock()

	// Flush first so a failed produce aborts rather than commits.
	if err := r.cl.Flush(endCtx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	committed := false
	if r.sess != nil {
		try := kgo.TryCommit
		if p := produceErr.Load(); p != nil {
			r.opts.Logger.Warn("produce failed; aborting the transaction, the batch will be rated again", "err", *p)
			try = kgo.TryAbort
		}
		var err error
		committed, err = r.sess.End(endCtx, try)
		if err != nil {
			r.abort()
			return fmt.Errorf("end transaction: %w", err)
		}
	} else {
		if p := produceErr.Load(); p != nil {
			r.abort()
			return fmt.Errorf("produce: %w", *p)
		}
		if err := r.cl.CommitUncommittedOffsets(endCtx); err != nil {
			r.opts.Logger.Warn("offset commit failed; the batch will be rated again (at-least-once mode)", "err", err)
		}
		committed = true
	}
	if !committed {
		r.m.txns.WithLabelValues("aborted").Inc()
		r.abort()
		return nil
	}
	r.mu.Lock()
	r.state.commit()
	r.m.keys.Set(float64(r.state.keys()))
	r.mu.Unlock()
	r.m.txns.WithLabelValues("committed").Inc()
	r.m.usage.WithLabelValues("rated").Add(float64(out.rated))
	r.m.usage.WithLabelValues("redelivery").Add(float64(out.redelivered))
	for reason, n := range out.quarantined {
		r.m.usage.WithLabelValues("quarantined").Add(float64(n))
		r.m.quarantined.WithLabelValues(string(reason)).Add(float64(n))
	}
	r.m.mispartitioned.Add(float64(out.mispartitioned))
	r.m.batchSeconds.Observe(time.Since(start).Seconds())
	r.m.batchEvents.Observe(float64(fetches.NumRecords()))
	return nil
}

func (r *Rater) abort() {
	r.mu.Lock()
	r.state.abort()
	r.mu.Unlock()
}

// process turns one usage record into its rated line or quarantine record
// (nil for a redelivery). Values are carved from arena. mu is held.
func (r *Rater) process(rec *kgo.Record, book *pricebook.Book, now time.Time, arena []byte, out *outcome) (*kgo.Record, []byte) {
	// The envelope and payload alias rec.Value and the decoder: what
	// outlives this call is copied (the staged usage_id, the rated line).
	env, payload, verr := r.decoder.DecodeEvent(rec.Value)
	if verr != nil {
		return r.quarantine(rec, "", verr.Reason, verr.Field, verr.Detail, out), arena
	}
	u, ok := payload.(*contract.Usage)
	if !ok {
		return r.quarantine(rec, env.EventID, contract.ReasonWrongEventType, "event_type", env.EventType+" on the usage topic", out), arena
	}
	key := contract.UsageKey(u.MeteringSource, u.MeteringID)
	part := contract.Partition([]byte(key), r.partitions)
	if part != rec.Partition || string(rec.Key) != key {
		out.mispartitioned++
	}
	switch v, first := r.state.check(part, u, key); v {
	case verdictRedelivery:
		out.redelivered++
		return nil, arena
	case verdictDuplicate:
		return r.quarantine(rec, env.EventID, contract.ReasonDuplicateUsage, "payload.metering_id",
			fmt.Sprintf("usage key %s is already claimed by usage_id %s", key, first), out), arena
	case verdictNotOwned:
		return r.quarantine(rec, env.EventID, contract.ReasonNotOwned, "",
			fmt.Sprintf("usage key %s hashes to partition %d, which another rater owns", key, part), out), arena
	}
	rating := Rate(book, r.currencies, u)
	if rating.Reason != "" {
		return r.quarantine(rec, env.EventID, rating.Reason, "", rating.Detail, out), arena
	}
	start := len(arena)
	arena = AppendRated(arena, &env, u, &rating, r.opts.Environment, now)
	value := arena[start:len(arena):len(arena)]
	out.rated++
	return &kgo.Record{
		Topic:   r.opts.Topics.Rated,
		Key:     []byte(key),
		Value:   value,
		Headers: systemHeaders(""),
	}, arena
}

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
