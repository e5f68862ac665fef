package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/readmodel"
)

// Results of an audit entry.
const (
	ResultAllowed = "allowed" // the request was authorised and served
	ResultDenied  = "denied"  // 401 or 403
)

// Entry is one row of audit_log.
type Entry struct {
	At        time.Time
	ActorID   string
	Roles     []string
	TenantIDs []string
	RequestID string
	Method    string
	Target    string // the path and query, or what an action names
	Endpoint  string
	Result    string
	Status    int
	Reason    string
	Remote    string
	KeyID     string
	PolicyRev string
}

// Sink stores audit entries; ClickHouse is one (NewClickHouseSink).
type Sink interface {
	WriteAudit(ctx context.Context, entries []Entry) error
}

// AuditorOptions configures an Auditor.
type AuditorOptions struct {
	// Queue bounds the denied requests waiting to be written; a flood of
	// denials past it is logged and counted, not stored. Default 10,000.
	Queue int
	// FlushInterval is how often queued entries are written. Default 1s.
	FlushInterval time.Duration
	// Logger gets every entry too (event "audit"), so the log holds the
	// trail even while the sink fails. Default slog.Default().
	Logger *slog.Logger
	// Registry, if set, gets the auditor's counters.
	Registry prometheus.Registerer
}

// Auditor writes audit entries. Record writes one before the request
// goes on (an action or a read that must not happen unaudited); Enqueue
// writes denials in batches in the background.
type Auditor struct {
	sink  Sink
	opts  AuditorOptions
	queue chan Entry
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// group writes the entries Record waits for.
	group *readmodel.GroupCommit[Entry]

	written *prometheus.CounterVec
	failed  prometheus.Counter
	dropped prometheus.Counter
}

// NewAuditor returns an Auditor writing to sink; Close stops it.
func NewAuditor(sink Sink, opts AuditorOptions) (*Auditor, error) {
	if opts.Queue <= 0 {
		opts.Queue = 10000
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &Auditor{sink: sink, opts: opts, queue: make(chan Entry, opts.Queue), stop: make(chan struct{}), done: make(chan struct{}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_query_audit_entries_total", Help: "Audit entries written, by result."}, []string{"result"}),
		failed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_query_audit_write_errors_total", Help: "Failed writes of audit entries to the audit log."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_query_audit_dropped_total", Help: "Denied requests logged but not stored because the audit queue was full."}),
	}
	a.group = readmodel.NewGroupCommit(maxCommit, a.write)
	if opts.Registry != nil {
		for _, c := range []prometheus.Collector{a.written, a.failed, a.dropped} {
			if err := opts.Registry.Register(c); err != nil {
				return nil, fmt.Errorf("register audit metrics: %w", err)
			}
		}
	}
	go a.run()
	return a, nil
}

func (a *Auditor) log(e Entry) {
	a.opts.Logger.Info("audit", "event", "audit", "actor_id", e.ActorID, "roles", e.Roles, "request_id", e.RequestID,
		"method", e.Method, "target", e.Target, "endpoint", e.Endpoint, "result", e.Result, "status", e.Status,
		"reason", e.Reason, "remote", e.Remote, "key_id", e.KeyID, "policy_rev", e.PolicyRev)
}

// Record writes e now and returns when the sink has it; the caller fails
// closed on an error.
func (a *Auditor) Record(ctx context.Context, e Entry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	a.log(e)
	if err := a.group.Submit(ctx, e); err != nil {
		return fmt.Errorf("write audit entry: %w", err)
	}
	return nil
}

// maxCommit bounds the entries of one write of Record's entries, which
// share a write with those that arrive together (group commit).
const maxCommit = 1000

// write writes entries to the sink and counts them.
func (a *Auditor) write(entries []Entry) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.sink.WriteAudit(ctx, entries); err != nil {
		a.failed.Inc()
		return err
	}
	for _, e := range entries {
		a.written.WithLabelValues(e.Result).Inc()
	}
	return nil
}

// Enqueue logs e and queues it for the next batch.
func (a *Auditor) Enqueue(e Entry) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	a.log(e)
	select {
	case a.queue <- e:
	default:
		a.dropped.Inc()
	}
}

func (a *Auditor) run() {
	defer close(a.done)
	t := time.NewTicker(a.opts.FlushInterval)
	defer t.Stop()
	var batch []Entry
	flush := func() {
		for {
			select {
			case e := <-a.queue:
				batch = append(batch, e)
				continue
			default:
			}
			break
		}
		if len(batch) == 0 {
			return
		}
		if err := a.write(batch); err != nil {
			a.opts.Logger.Error("audit entries not stored; they are in this log", "event", "audit_write_failed", "entries", len(batch), "err", err)
		}
		batch = batch[:0]
	}
	for {
		select {
		case <-a.stop:
			flush()
			return
		case <-t.C:
			flush()
		}
	}
}

// Close writes what is queued and stops the background writer.
func (a *Auditor) Close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}

// Inserter is what the ClickHouse sink needs; a clickhouse-go
// driver.Conn is one.
type Inserter interface {
	PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error)
}

const auditInsert = `INSERT INTO audit_log (at, at_us, actor_id, roles, tenant_ids, request_id, method, target, endpoint,
	result, status, reason, remote, key_id, policy_rev)`

type chSink struct{ conn Inserter }

// NewClickHouseSink returns a Sink appending to audit_log (migration
// 008) over conn.
func NewClickHouseSink(conn Inserter) Sink { return chSink{conn} }

func (s chSink) WriteAudit(ctx context.Context, entries []Entry) error {
	b, err := s.conn.PrepareBatch(ctx, auditInsert)
	if err != nil {
		return err
	}
	for _, e := range entries {
		at := e.At.UTC()
		err := b.Append(at.Truncate(time.Second), uint32(at.Nanosecond()/1000), e.ActorID, nonNil(e.Roles), nonNil(e.TenantIDs),
			e.RequestID, e.Method, e.Target, e.Endpoint, e.Result, uint16(e.Status), e.Reason, e.Remote, e.KeyID, e.PolicyRev)
		if err != nil {
			_ = b.Abort()
			return err
		}
	}
	return b.Send()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// MemorySink keeps entries in memory, for tests and for a server without
// a read model to write to.
type MemorySink struct {
	// mu protects entries.
	mu      sync.Mutex
	entries []Entry
	// Fail, when set, is returned by every write.
	Fail error
}

// WriteAudit appends entries.
func (m *MemorySink) WriteAudit(_ context.Context, entries []Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	m.entries = append(m.entries, entries...)
	return nil
}

// Entries returns a copy of the entries written.
func (m *MemorySink) Entries() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries)
}

// request is what the middleware knows of a request, for Record.
type request struct {
	auditor *Auditor
	entry   Entry
}

type requestKey struct{}

// WithRequest returns ctx with what Record needs to audit from a handler:
// the auditor and the request's audit entry so far (actor, request id,
// method, target, endpoint, policy_rev).
func WithRequest(ctx context.Context, a *Auditor, e Entry) context.Context {
	return context.WithValue(ctx, requestKey{}, request{auditor: a, entry: e})
}

// ErrNoAuditor means Record was called outside a request the middleware
// admitted.
var ErrNoAuditor = errors.New("access: no auditor in the request's context")

// Record writes an audit entry for the request of ctx from a handler (an
// action's outcome, say): result and the fields of e that are set
// (Target, Status, Reason) over the request's own. The handler fails
// closed on an error.
func Record(ctx context.Context, e Entry) error {
	rq, ok := ctx.Value(requestKey{}).(request)
	if !ok || rq.auditor == nil {
		return ErrNoAuditor
	}
	full := rq.entry
	full.At = time.Time{}
	if e.Result != "" {
		full.Result = e.Result
	}
	if e.Target != "" {
		full.Target = e.Target
	}
	if e.Status != 0 {
		full.Status = e.Status
	}
	if e.Reason != "" {
		full.Reason = e.Reason
	}
	return rq.auditor.Record(ctx, full)
}
