// Package sink writes joiner output to the ClickHouse read model: current
// finding rows (drift_evidence), the append-only transition history
// (drift_history), per-partition progress (consumer_progress), the
// per-producer rejection counts (producer_rejections) and the fleet
// core's tables (node_lifecycle_history, rollout_status, sync_debt_minute,
// fleet_artifacts, policy_bundles).
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

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// Progress is one partition's progress row.
type Progress struct {
	Consumer     string
	Partition    int32
	Watermark    time.Time
	Events       uint64
	FindingsOpen uint64
	// Position is where the row's state is in the partition's log: the
	// sum of its streams' offsets after the last record applied
	// (logmerge.Merge.Position). It versions the row (PositionVersion).
	Position uint64
}

// Batch is what one flush writes.
type Batch struct {
	// Current holds the latest row of each finding changed in the batch.
	Current Packed[drift.Finding]
	// History holds every transition of the batch, in order.
	History Packed[Transition]
	// Nodes holds the latest node-agent status of each node changed in
	// the batch.
	Nodes Packed[nodeagent.Status]
	// Counts holds the finding counts of the groups changed in the batch
	// (finding_counts).
	Counts []Count
	// Top holds the attention slots of findings changed in the batch
	// (attention_top).
	Top []TopSlot
	// NodeTop holds the attention slots of nodes changed in the batch
	// (attention_top_nodes).
	NodeTop []TopSlot
	// Progress holds the progress of the partitions the batch covers.
	Progress []Progress
	// Producers holds the per-producer rejection counts changed in the
	// batch (producer_rejections).
	Producers []readmodel.ProducerRejection
	// The fleet core (fleet.go): lifecycle transitions, rollout counts,
	// sync-debt minutes and registry entries of the batch.
	Fleet Fleet
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return b.Current.Len() == 0 && b.History.Len() == 0 && b.Nodes.Len() == 0 && len(b.Counts) == 0 &&
		len(b.Top) == 0 && len(b.NodeTop) == 0 && len(b.Progress) == 0 && len(b.Producers) == 0 && b.Fleet.empty()
}

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset() {
	b.Current.Reset()
	b.History.Reset()
	b.Nodes.Reset()
	b.Progress, b.Producers = b.Progress[:0], b.Producers[:0]
	b.Counts, b.Top, b.NodeTop = b.Counts[:0], b.Top[:0], b.NodeTop[:0]
	b.Fleet.reset()
}

// Transition is a row of drift_history: a finding as one of its
// transitions left it, with only the columns the history keeps (a batch
// holds one per transition).
type Transition struct {
	EvidenceID      string
	CorrelationID   string
	Transition      contract.Transition
	Class           drift.Class
	Severity        contract.Severity
	Status          contract.FindingStatus
	Posture         contract.Posture
	ExpectedState   string
	ObservedState   string
	ObservedVersion string
	RetryCount      uint32
	Version         uint64
	// At is the event time of the transition: when the finding was last
	// seen, or resolved for a resolution; for an action, when it was
	// accepted.
	At time.Time
	// ActionState is the finding's action_state after the transition.
	ActionState contract.ActionState
	// Action, ActionID, ActorID and Reason describe the operator action
	// of an action or action_refused row (empty otherwise); Refusal is
	// why the joiner refused it.
	Action   contract.Action
	ActionID string
	ActorID  string
	Reason   string
	Refusal  contract.ActionReason
}

// TransitionOf returns the history row of f's latest transition.
func TransitionOf(f *drift.Finding) Transition {
	at := f.LastSeenAt
	if f.Transition == contract.TransitionResolved {
		at = f.ResolvedAt
	}
	return Transition{EvidenceID: f.EvidenceID, CorrelationID: f.CorrelationID, Transition: f.Transition, Class: f.Class,
		Severity: f.Severity, Status: f.Status, Posture: f.Posture, ExpectedState: f.ExpectedState,
		ObservedState: f.ObservedState, ObservedVersion: f.ObservedVersion, RetryCount: f.RetryCount,
		Version: f.Version, At: at, ActionState: f.ActionState}
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

var evidenceTable = readmodel.NewTable("drift_evidence",
	readmodel.String("evidence_id", func(f *finding) string { return f.EvidenceID }),
	readmodel.String("correlation_id", func(f *finding) string { return f.CorrelationID }),
	readmodel.String("resource_family", func(f *finding) string { return f.ResourceFamily }),
	readmodel.String("product_id", func(f *finding) string { return f.ProductID }),
	readmodel.String("owning_domain", func(f *finding) string { return f.OwningDomain }),
	readmodel.String("owning_package", func(f *finding) string { return f.OwningPackage }),
	readmodel.String("domain_id", func(f *finding) string { return f.DomainID }),
	readmodel.String("record_type", func(f *finding) string { return f.RecordType }),
	readmodel.String("record_id", func(f *finding) string { return f.RecordID }),
	readmodel.String("expected_state", func(f *finding) string { return f.ExpectedState }),
	readmodel.String("expected_version", func(f *finding) string { return f.ExpectedVersion }),
	readmodel.String("provider", func(f *finding) string { return f.Provider }),
	readmodel.String("provider_id", func(f *finding) string { return f.ProviderID }),
	readmodel.String("observed_state", func(f *finding) string { return f.ObservedState }),
	readmodel.String("observed_version", func(f *finding) string { return f.ObservedVersion }),
	readmodel.DateTime("observed_at", func(f *finding) time.Time { return readmodel.Epoch(f.ObservedAt) }),
	readmodel.String("classification", func(f *finding) string { return f.Class.String() }),
	readmodel.String("severity", func(f *finding) string { return string(f.Severity) }),
	readmodel.String("status", func(f *finding) string { return string(f.Status) }),
	readmodel.DateTime("first_seen_at", func(f *finding) time.Time { return readmodel.Epoch(f.FirstSeenAt) }),
	readmodel.DateTime("last_seen_at", func(f *finding) time.Time { return readmodel.Epoch(f.LastSeenAt) }),
	readmodel.DateTime("resolved_at", func(f *finding) time.Time { return readmodel.Epoch(f.ResolvedAt) }),
	readmodel.UInt32("retry_count", func(f *finding) uint32 { return f.RetryCount }),
	readmodel.String("posture", func(f *finding) string { return string(f.Posture) }),
	readmodel.DateTime("next_attempt_at", func(f *finding) time.Time { return readmodel.Epoch(f.NextAttemptAt) }),
	readmodel.String("runbook", func(f *finding) string { return f.Runbook }),
	readmodel.Float64("attention_score", func(f *finding) float64 { return f.AttentionScore }),
	readmodel.UInt64("version", func(f *finding) uint64 { return f.Version }),
	readmodel.Now[finding]("updated_at"),
	readmodel.String("acknowledged_by", func(f *finding) string { return f.AcknowledgedBy }),
	readmodel.String("assignee", func(f *finding) string { return f.Assignee }),
	readmodel.DateTime("suppressed_until", func(f *finding) time.Time { return readmodel.Epoch(f.SuppressedUntil) }),
	readmodel.String("action_state", func(f *finding) string { return string(f.ActionState) }),
	readmodel.String("last_action_id", func(f *finding) string { return f.LastActionID }),
	readmodel.Strings("tags", func(f *finding) []string { return f.Tags }),
)

var historyTable = readmodel.NewTable("drift_history",
	readmodel.String("evidence_id", func(t *transition) string { return t.EvidenceID }),
	readmodel.UInt64("version", func(t *transition) uint64 { return t.Version }),
	readmodel.String("transition", func(t *transition) string { return string(t.Transition) }),
	readmodel.String("classification", func(t *transition) string { return t.Class.String() }),
	readmodel.String("severity", func(t *transition) string { return string(t.Severity) }),
	readmodel.String("status", func(t *transition) string { return string(t.Status) }),
	readmodel.String("posture", func(t *transition) string { return string(t.Posture) }),
	readmodel.String("expected_state", func(t *transition) string { return t.ExpectedState }),
	readmodel.String("observed_state", func(t *transition) string { return t.ObservedState }),
	readmodel.String("observed_version", func(t *transition) string { return t.ObservedVersion }),
	readmodel.UInt32("retry_count", func(t *transition) uint32 { return t.RetryCount }),
	readmodel.DateTime("at", func(t *transition) time.Time { return readmodel.Epoch(t.At) }),
	readmodel.String("correlation_id", func(t *transition) string { return t.CorrelationID }),
	readmodel.String("action_state", func(t *transition) string { return string(t.ActionState) }),
	readmodel.String("action", func(t *transition) string { return string(t.Action) }),
	readmodel.String("action_id", func(t *transition) string { return t.ActionID }),
	readmodel.String("actor_id", func(t *transition) string { return t.ActorID }),
	readmodel.String("reason", func(t *transition) string { return t.Reason }),
	readmodel.String("refusal", func(t *transition) string { return string(t.Refusal) }),
)

var nodesTable = readmodel.NewTable("node_agent_status",
	readmodel.String("node_id", func(n *status) string { return n.NodeID }),
	readmodel.String("domain_id", func(n *status) string { return n.DomainID }),
	readmodel.String("owning_domain", func(n *status) string { return n.OwningDomain }),
	readmodel.String("node_agent_state", func(n *status) string { return n.State }),
	readmodel.String("node_agent_reason", func(n *status) string { return n.Reason }),
	readmodel.String("update_path", func(n *status) string { return n.UpdatePath }),
	readmodel.String("expected_agent_version", func(n *status) string { return n.ExpectedAgentVersion }),
	readmodel.String("observed_agent_version", func(n *status) string { return n.ObservedAgentVersion }),
	readmodel.String("cert_issuer_fingerprint", func(n *status) string { return n.CertIssuerFingerprint }),
	readmodel.String("ingress_trust_fingerprint", func(n *status) string { return n.IngressTrustFingerprint }),
	readmodel.String("host_fingerprint", func(n *status) string { return n.HostFingerprint }),
	readmodel.String("terminal_stream_probe", func(n *status) string { return n.TerminalStreamProbe }),
	readmodel.String("workload_impact", func(n *status) string { return n.WorkloadImpact }),
	readmodel.String("health", func(n *status) string { return n.Health }),
	readmodel.String("gate", func(n *status) string { return n.Gate }),
	readmodel.String("connectivity_mode", func(n *status) string { return n.ConnectivityMode }),
	readmodel.Float64("rtt_ms", func(n *status) float64 { return n.RTTMs }),
	readmodel.Float64("loss_pct", func(n *status) float64 { return n.LossPct }),
	readmodel.Float64("bandwidth_kbps", func(n *status) float64 { return n.BandwidthKbps }),
	readmodel.Int64("backlog_messages", func(n *status) int64 { return n.BacklogMessages }),
	readmodel.Int64("seconds_behind", func(n *status) int64 { return n.SecondsBehind }),
	readmodel.Bool("replay_required", func(n *status) bool { return n.ReplayRequired }),
	readmodel.DateTime("last_seen_at", func(n *status) time.Time { return readmodel.Epoch(n.LastSeenAt) }),
	readmodel.Float64("attention_score", func(n *status) float64 { return n.AttentionScore }),
	readmodel.UInt64("version", func(n *status) uint64 { return n.Version }),
	readmodel.Now[status]("updated_at"),
	readmodel.Strings("tags", func(n *status) []string { return n.Tags }),
	readmodel.String("node_kind", func(n *status) string { return n.NodeKind }),
	readmodel.String("lifecycle_intent", func(n *status) string { return n.LifecycleIntent }),
	readmodel.String("phase", func(n *status) string { return n.Phase }),
	readmodel.String("state", func(n *status) string { return n.LifecycleState }),
	readmodel.DateTime("phase_since", func(n *status) time.Time { return readmodel.Epoch(n.PhaseSince) }),
	readmodel.UInt64("transitions", func(n *status) uint64 { return n.Transitions }),
	readmodel.String("master_of_record", func(n *status) string { return n.MasterOfRecord }),
	readmodel.Strings("controller_ids", func(n *status) []string { return n.ControllerIDs }),
	readmodel.String("controller_id", func(n *status) string { return n.ControllerID }),
	readmodel.String("authority", func(n *status) string { return n.Authority }),
	readmodel.String("relay_id", func(n *status) string { return n.RelayID }),
	readmodel.String("policy_bundle_id", func(n *status) string { return n.PolicyBundleID }),
	readmodel.String("target_version", func(n *status) string { return n.TargetVersion }),
	readmodel.String("reported_version", func(n *status) string { return n.ReportedVersion }),
	readmodel.String("rollout", func(n *status) string { return n.Rollout }),
	readmodel.String("artifact_id", func(n *status) string { return n.ArtifactID }),
	readmodel.String("artifact_digest", func(n *status) string { return n.ArtifactDigest }),
	readmodel.String("supply_chain", func(n *status) string { return n.SupplyChain }),
	readmodel.Int64("uptime_s", func(n *status) int64 { return n.UptimeS }),
	readmodel.Strings("recent_events", func(n *status) []string { return n.Recent.Strings() }),
)

var progressTable = readmodel.NewTable("consumer_progress",
	readmodel.String("consumer", func(p *progress) string { return p.Consumer }),
	readmodel.UInt32("partition", func(p *progress) uint32 { return uint32(p.Partition) }),
	readmodel.DateTime("watermark", func(p *progress) time.Time { return readmodel.Epoch(p.Watermark) }),
	readmodel.UInt64("events", func(p *progress) uint64 { return p.Events }),
	readmodel.UInt64("findings_open", func(p *progress) uint64 { return p.FindingsOpen }),
	readmodel.Now[progress]("updated_at"),
	readmodel.UInt64("version", func(p *progress) uint64 { return readmodel.PositionVersion(p.Position) }),
)

// Write inserts the batches as one write, each table in one insert of
// their rows in order (a joiner writes the outputs of its partitions
// together): history first, then current rows, with the node statuses
// beside them on a second connection; then the summaries, the counts
// beside the two attention tops (findings, then nodes), then progress, so
// that neither a summary nor the progress ever claims more than
// drift_evidence and node_agent_status hold, and a reader that waits for
// a watermark in consumer_progress reads summaries at least as new. The
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
		return nodesTable.InsertBlocks(ctx, c.conn, now, Blocks(bs, func(b *Batch) *Packed[status] { return &b.Nodes }))
	}, func() error {
		if err := historyTable.InsertBlocks(ctx, c.conn, now, Blocks(bs, func(b *Batch) *Packed[transition] { return &b.History })); err != nil {
			return err
		}
		return evidenceTable.InsertBlocks(ctx, c.conn, now, Blocks(bs, func(b *Batch) *Packed[finding] { return &b.Current }))
	})
	if err != nil {
		return err
	}
	err = beside(func() error {
		if err := topTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []TopSlot { return b.Top })...); err != nil {
			return err
		}
		return nodeTopTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []TopSlot { return b.NodeTop })...)
	}, func() error {
		return countsTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []Count { return b.Counts })...)
	})
	if err != nil {
		return err
	}
	if err := readmodel.ProducerRejections.Insert(ctx, c.conn, now,
		partsOf(bs, func(b *Batch) []readmodel.ProducerRejection { return b.Producers })...); err != nil {
		return err
	}
	if err := c.writeFleet(ctx, now, bs); err != nil {
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
