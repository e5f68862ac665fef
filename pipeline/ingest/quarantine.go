package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
)

// QuarantinerOptions configure a Quarantiner.
type QuarantinerOptions struct {
	// ActorID is the SYSTEM actor of the consuming component
	// ("SYSTEM::joiner"), stamped as the actor_id header and in the value.
	// Required.
	ActorID string

	// Topic is the quarantine topic. Default contract.TopicQuarantine.
	Topic string

	// LineLimit bounds the bytes of the rejected value copied into the
	// quarantine record. Default contract.DefaultQuarantineLineLimit.
	LineLimit int

	// Registerer, when set, receives
	// driftline_quarantine_records_total{actor_id, reason}.
	Registerer prometheus.Registerer

	// Now stamps received_at. Default time.Now.
	Now func() time.Time
}

// Quarantiner writes Kafka records that failed validation (typically
// contract.Validator.DecodeEvent in a consumer: a producer bypassed the
// gateway) to the quarantine topic, keyed like the original, in the
// gateway's value shape (contract.Quarantined) with the source topic,
// partition and offset. It is safe for concurrent use.
//
// Use Record inside a transaction (the record is then committed with the
// consumer's offsets), or Produce then Flush before committing offsets, so
// a crash can repeat a quarantine record but never lose one.
type Quarantiner struct {
	cl   *kgo.Client
	opts QuarantinerOptions
	n    *prometheus.CounterVec

	mu      sync.Mutex    // mu protects pending, idle and err
	pending int           // records produced and not yet acknowledged
	idle    chan struct{} // closed when pending drops to zero; nil while zero
	err     error         // first produce error since the last Flush
}

// NewQuarantiner returns a Quarantiner producing through cl (which may be
// nil when only Record and Value are used).
func NewQuarantiner(cl *kgo.Client, opts QuarantinerOptions) (*Quarantiner, error) {
	if prefix, name, ok := strings.Cut(opts.ActorID, "::"); !ok || prefix != contract.SourceSystem || name == "" {
		return nil, errors.New("quarantiner: ActorID must be SYSTEM::<component>")
	}
	if opts.Topic == "" {
		opts.Topic = contract.TopicQuarantine
	}
	if opts.LineLimit <= 0 {
		opts.LineLimit = contract.DefaultQuarantineLineLimit
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	q := &Quarantiner{cl: cl, opts: opts}
	q.n = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "driftline_quarantine_records_total",
		Help:        "Kafka records that failed validation and were sent to the quarantine topic, by reason.",
		ConstLabels: prometheus.Labels{"actor_id": opts.ActorID},
	}, []string{"reason"})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(q.n); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// Value encodes the quarantine value of rec rejected with verr.
func (q *Quarantiner) Value(rec *kgo.Record, verr *contract.ValidationError) []byte {
	doc := contract.Quarantined{
		Reason: verr.Reason, Field: verr.Field, Detail: verr.Detail,
		ActorID: q.opts.ActorID, SourceType: contract.SourceSystem,
		ReceivedAt: q.opts.Now().UTC().Format(time.RFC3339Nano),
	}
	doc.SetLine(rec.Value, q.opts.LineLimit)
	doc.SetSource(rec.Topic, rec.Partition, rec.Offset)
	if verr.Reason != contract.ReasonBadJSON && verr.Reason != contract.ReasonOversized {
		if env, _ := (contract.Validator{}).Decode(rec.Value); env.EventID != "" {
			doc.EventID = env.EventID
		}
	}
	for _, h := range rec.Headers {
		if h.Key == contract.HeaderActorID {
			doc.OriginActorID = string(h.Value)
		}
	}
	v, err := json.Marshal(doc)
	if err != nil {
		panic("BUG: quarantine value does not encode: " + err.Error())
	}
	return v
}

// Record returns the quarantine record of rec rejected with verr, for a
// caller that produces it itself (in a transaction, say). It counts the
// record.
func (q *Quarantiner) Record(rec *kgo.Record, verr *contract.ValidationError) *kgo.Record {
	q.n.WithLabelValues(string(verr.Reason)).Inc()
	return &kgo.Record{
		Topic: q.opts.Topic,
		Key:   rec.Key,
		Value: q.Value(rec, verr),
		Headers: []kgo.RecordHeader{
			{Key: contract.HeaderActorID, Value: []byte(q.opts.ActorID)},
			{Key: contract.HeaderSourceType, Value: []byte(contract.SourceSystem)},
			{Key: contract.HeaderReason, Value: []byte(verr.Reason)},
		},
	}
}

// Produce sends the quarantine record of rec asynchronously. Call Flush
// before committing rec's offset.
func (q *Quarantiner) Produce(ctx context.Context, rec *kgo.Record, verr *contract.ValidationError) {
	if q.cl == nil {
		panic("BUG: Quarantiner.Produce without a client")
	}
	r := q.Record(rec, verr)
	q.mu.Lock()
	q.pending++
	if q.idle == nil {
		q.idle = make(chan struct{})
	}
	q.mu.Unlock()
	q.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		if err != nil && q.err == nil {
			q.err = err
		}
		if q.pending--; q.pending == 0 {
			close(q.idle)
			q.idle = nil
		}
	})
}

// Flush waits until every record produced so far is acknowledged (or ctx
// ends) and returns the first produce error since the previous Flush. On
// an error, do not commit the offsets of the records concerned: consuming
// them again repeats their quarantine records, which is harmless.
func (q *Quarantiner) Flush(ctx context.Context) error {
	q.mu.Lock()
	idle := q.idle
	q.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	err := q.err
	q.err = nil
	return err
}
