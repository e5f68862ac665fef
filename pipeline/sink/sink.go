// Package sink writes joiner output to the ClickHouse read model: current
// finding rows (drift_evidence), the append-only transition history
// (drift_history) and per-partition progress (consumer_progress).
//
// Writes are idempotent: every row carries the finding's version, and the
// tables are ReplacingMergeTree on (key, version), so a batch written
// twice (a crash between the write and the offset commit) collapses to
// one row per version on merge and reads the same with FINAL.
package sink

import (
	"context"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/chdb"
	"github.com/driftline/driftline/pipeline/drift"
	"github.com/driftline/driftline/pipeline/nodeagent"
)

// Progress is one partition's progress row.
type Progress struct {
	Consumer     string
	Partition    int32
	Watermark    time.Time
	Events       uint64
	FindingsOpen uint64
}

// Batch is what one flush writes.
type Batch struct {
	// Current holds the latest row of each finding changed in the batch.
	Current Rows[drift.Finding]
	// History holds every transition of the batch, in order.
	History Rows[Transition]
	// Nodes holds the latest node-agent status of each node changed in
	// the batch.
	Nodes Rows[nodeagent.Status]
	// Counts holds the finding counts of the groups changed in the batch
	// (finding_counts).
	Counts []Count
	// Top holds the attention slots changed in the batch (attention_top).
	Top []TopSlot
	// Progress holds the progress of the partitions the batch covers.
	Progress []Progress
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return b.Current.Len() == 0 && b.History.Len() == 0 && b.Nodes.Len() == 0 && len(b.Counts) == 0 &&
		len(b.Top) == 0 && len(b.Progress) == 0
}

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset() {
	b.Current.Reset()
	b.History.Reset()
	b.Nodes.Reset()
	b.Progress = b.Progress[:0]
	b.Counts, b.Top = b.Counts[:0], b.Top[:0]
}

// Transition is a row of drift_history: a finding as one of its
// transitions left it, with only the columns the history keeps (192 bytes
// against a drift.Finding's 472; a batch copies one per transition).
type Transition struct {
	EvidenceID      string
	CorrelationID   string
	Transition      string
	Class           drift.Class
	Severity        string
	Status          string
	Posture         string
	ExpectedState   string
	ObservedState   string
	ObservedVersion string
	RetryCount      uint32
	Version         uint64
	// At is the event time of the transition: when the finding was last
	// seen, or resolved for a resolution.
	At time.Time
}

// TransitionOf returns the history row of f's latest transition.
func TransitionOf(f *drift.Finding) Transition {
	at := f.LastSeenAt
	if f.Transition == drift.TransitionResolved {
		at = f.ResolvedAt
	}
	return Transition{EvidenceID: f.EvidenceID, CorrelationID: f.CorrelationID, Transition: f.Transition, Class: f.Class,
		Severity: f.Severity, Status: f.Status, Posture: f.Posture, ExpectedState: f.ExpectedState,
		ObservedState: f.ObservedState, ObservedVersion: f.ObservedVersion, RetryCount: f.RetryCount,
		Version: f.Version, At: at}
}

// ClickHouse writes batches to a ClickHouse database.
type ClickHouse struct {
	conn driver.Conn
	now  func() time.Time
}

// NewClickHouse returns a sink writing through conn, whose database must
// hold the read model (see schema/clickhouse).
func NewClickHouse(conn driver.Conn) *ClickHouse {
	return &ClickHouse{conn: conn, now: time.Now}
}

type (
	finding    = drift.Finding
	transition = Transition
	progress   = Progress
	status     = nodeagent.Status
)

var evidenceTable = chdb.NewTable("drift_evidence",
	chdb.String("evidence_id", func(f *finding) string { return f.EvidenceID }),
	chdb.String("correlation_id", func(f *finding) string { return f.CorrelationID }),
	chdb.String("resource_family", func(f *finding) string { return f.ResourceFamily }),
	chdb.String("product_id", func(f *finding) string { return f.ProductID }),
	chdb.String("owning_domain", func(f *finding) string { return f.OwningDomain }),
	chdb.String("owning_package", func(f *finding) string { return f.OwningPackage }),
	chdb.String("domain_id", func(f *finding) string { return f.DomainID }),
	chdb.String("record_type", func(f *finding) string { return f.RecordType }),
	chdb.String("record_id", func(f *finding) string { return f.RecordID }),
	chdb.String("expected_state", func(f *finding) string { return f.ExpectedState }),
	chdb.String("expected_version", func(f *finding) string { return f.ExpectedVersion }),
	chdb.String("provider", func(f *finding) string { return f.Provider }),
	chdb.String("provider_id", func(f *finding) string { return f.ProviderID }),
	chdb.String("observed_state", func(f *finding) string { return f.ObservedState }),
	chdb.String("observed_version", func(f *finding) string { return f.ObservedVersion }),
	chdb.DateTime("observed_at", func(f *finding) time.Time { return chdb.Epoch(f.ObservedAt) }),
	chdb.String("classification", func(f *finding) string { return f.Class.String() }),
	chdb.String("severity", func(f *finding) string { return f.Severity }),
	chdb.String("status", func(f *finding) string { return f.Status }),
	chdb.DateTime("first_seen_at", func(f *finding) time.Time { return chdb.Epoch(f.FirstSeenAt) }),
	chdb.DateTime("last_seen_at", func(f *finding) time.Time { return chdb.Epoch(f.LastSeenAt) }),
	chdb.DateTime("resolved_at", func(f *finding) time.Time { return chdb.Epoch(f.ResolvedAt) }),
	chdb.UInt32("retry_count", func(f *finding) uint32 { return f.RetryCount }),
	chdb.String("posture", func(f *finding) string { return f.Posture }),
	chdb.DateTime("next_attempt_at", func(f *finding) time.Time { return chdb.Epoch(f.NextAttemptAt) }),
	chdb.String("runbook", func(f *finding) string { return f.Runbook }),
	chdb.Float64("attention_score", func(f *finding) float64 { return f.AttentionScore }),
	chdb.UInt64("version", func(f *finding) uint64 { return f.Version }),
	chdb.Now[finding]("updated_at"),
)

var historyTable = chdb.NewTable("drift_history",
	chdb.String("evidence_id", func(t *transition) string { return t.EvidenceID }),
	chdb.UInt64("version", func(t *transition) uint64 { return t.Version }),
	chdb.String("transition", func(t *transition) string { return t.Transition }),
	chdb.String("classification", func(t *transition) string { return t.Class.String() }),
	chdb.String("severity", func(t *transition) string { return t.Severity }),
	chdb.String("status", func(t *transition) string { return t.Status }),
	chdb.String("posture", func(t *transition) string { return t.Posture }),
	chdb.String("expected_state", func(t *transition) string { return t.ExpectedState }),
	chdb.String("observed_state", func(t *transition) string { return t.ObservedState }),
	chdb.String("observed_version", func(t *transition) string { return t.ObservedVersion }),
	chdb.UInt32("retry_count", func(t *transition) uint32 { return t.RetryCount }),
	chdb.DateTime("at", func(t *transition) time.Time { return chdb.Epoch(t.At) }),
	chdb.String("correlation_id", func(t *transition) string { return t.CorrelationID }),
)

var nodesTable = chdb.NewTable("node_agent_status",
	chdb.String("node_id", func(n *status) string { return n.NodeID }),
	chdb.String("domain_id", func(n *status) string { return n.DomainID }),
	chdb.String("owning_domain", func(n *status) string { return n.OwningDomain }),
	chdb.String("node_agent_state", func(n *status) string { return n.State }),
	chdb.String("node_agent_reason", func(n *status) string { return n.Reason }),
	chdb.String("update_path", func(n *status) string { return n.UpdatePath }),
	chdb.String("expected_agent_version", func(n *status) string { return n.ExpectedAgentVersion }),
	chdb.String("observed_agent_version", func(n *status) string { return n.ObservedAgentVersion }),
	chdb.String("cert_issuer_fingerprint", func(n *status) string { return n.CertIssuerFingerprint }),
	chdb.String("ingress_trust_fingerprint", func(n *status) string { return n.IngressTrustFingerprint }),
	chdb.String("host_fingerprint", func(n *status) string { return n.HostFingerprint }),
	chdb.String("terminal_stream_probe", func(n *status) string { return n.TerminalStreamProbe }),
	chdb.String("workload_impact", func(n *status) string { return n.WorkloadImpact }),
	chdb.String("health", func(n *status) string { return n.Health }),
	chdb.String("gate", func(n *status) string { return n.Gate }),
	chdb.String("connectivity_mode", func(n *status) string { return n.ConnectivityMode }),
	chdb.Float64("rtt_ms", func(n *status) float64 { return n.RTTMs }),
	chdb.Float64("loss_pct", func(n *status) float64 { return n.LossPct }),
	chdb.Float64("bandwidth_kbps", func(n *status) float64 { return n.BandwidthKbps }),
	chdb.Int64("backlog_messages", func(n *status) int64 { return n.BacklogMessages }),
	chdb.Int64("seconds_behind", func(n *status) int64 { return n.SecondsBehind }),
	chdb.Bool("replay_required", func(n *status) bool { return n.ReplayRequired }),
	chdb.DateTime("last_seen_at", func(n *status) time.Time { return chdb.Epoch(n.LastSeenAt) }),
	chdb.Float64("attention_score", func(n *status) float64 { return n.AttentionScore }),
	chdb.UInt64("version", func(n *status) uint64 { return n.Version }),
	chdb.Now[status]("updated_at"),
)

var progressTable = chdb.NewTable("consumer_progress",
	chdb.String("consumer", func(p *progress) string { return p.Consumer }),
	chdb.UInt32("partition", func(p *progress) uint32 { return uint32(p.Partition) }),
	chdb.DateTime("watermark", func(p *progress) time.Time { return chdb.Epoch(p.Watermark) }),
	chdb.UInt64("events", func(p *progress) uint64 { return p.Events }),
	chdb.UInt64("findings_open", func(p *progress) uint64 { return p.FindingsOpen }),
	chdb.Now[progress]("updated_at"),
	chdb.NowVersion[progress]("version"),
)

// Write inserts the batches as one write, each table in one insert of
// their rows in order (a joiner writes the outputs of its partitions
// together): history first, then current rows, with the node statuses
// beside them on a second connection; then the two summaries side by
// side, then progress, so that neither a summary nor the progress ever
// claims more than drift_evidence holds, and a reader that waits for a
// watermark in consumer_progress reads summaries at least as new. The
// node statuses are the largest table of a batch, and writing them
// beside the findings lets ClickHouse insert both at once (an insert is
// mostly one server thread) instead of the poll loop waiting for their
// sum; each insert also has a fixed cost (a part on the server), which
// the summaries, written side by side, pay once in the write's time.
//
// Each insert goes a column at a time (chdb.Table), with no value boxed
// per row.
func (c *ClickHouse) Write(ctx context.Context, bs ...*Batch) error {
	now := c.now().UTC()
	err := beside(func() error {
		return nodesTable.Insert(ctx, c.conn, now, chunksOf(bs, func(b *Batch) *Rows[status] { return &b.Nodes })...)
	}, func() error {
		if err := historyTable.Insert(ctx, c.conn, now, chunksOf(bs, func(b *Batch) *Rows[transition] { return &b.History })...); err != nil {
			return err
		}
		return evidenceTable.Insert(ctx, c.conn, now, chunksOf(bs, func(b *Batch) *Rows[finding] { return &b.Current })...)
	})
	if err != nil {
		return err
	}
	err = beside(func() error {
		return topTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []TopSlot { return b.Top })...)
	}, func() error {
		return countsTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []Count { return b.Counts })...)
	})
	if err != nil {
		return err
	}
	return progressTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []progress { return b.Progress })...)
}

// beside runs side on another goroutine (and connection) while main runs,
// waits for both, and returns main's error, else side's.
func beside(side, main func() error) error {
	var wg sync.WaitGroup
	var sideErr error
	wg.Go(func() { sideErr = side() })
	err := main()
	wg.Wait()
	if err != nil {
		return err
	}
	return sideErr
}

// partsOf returns the non-empty row slices rows picks from bs.
func partsOf[R any](bs []*Batch, rows func(*Batch) []R) [][]R {
	var parts [][]R
	for _, b := range bs {
		if r := rows(b); len(r) > 0 {
			parts = append(parts, r)
		}
	}
	return parts
}

// chunksOf returns the chunks of the rows rows picks from bs, in order.
func chunksOf[R any](bs []*Batch, rows func(*Batch) *Rows[R]) [][]R {
	var parts [][]R
	for _, b := range bs {
		parts = append(parts, rows(b).All()...)
	}
	return parts
}
