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
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

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
	Current []drift.Finding
	// History holds every transition of the batch, in order.
	History []drift.Finding
	// Nodes holds the latest node-agent status of each node changed in
	// the batch.
	Nodes []nodeagent.Status
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
	return len(b.Current) == 0 && len(b.History) == 0 && len(b.Nodes) == 0 && len(b.Counts) == 0 &&
		len(b.Top) == 0 && len(b.Progress) == 0
}

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset() {
	b.Current, b.History, b.Nodes, b.Progress = b.Current[:0], b.History[:0], b.Nodes[:0], b.Progress[:0]
	b.Counts, b.Top = b.Counts[:0], b.Top[:0]
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

const insertEvidence = `INSERT INTO drift_evidence (evidence_id, correlation_id, resource_family, product_id,
 owning_domain, owning_package, domain_id, record_type, record_id, expected_state, expected_version,
 provider, provider_id, observed_state, observed_version, observed_at, classification, severity, status,
 first_seen_at, last_seen_at, resolved_at, retry_count, posture, next_attempt_at, runbook, attention_score,
 version, updated_at)`

const insertHistory = `INSERT INTO drift_history (evidence_id, version, transition, classification, severity,
 status, posture, expected_state, observed_state, observed_version, retry_count, at, correlation_id)`

const insertNodes = `INSERT INTO node_agent_status (node_id, domain_id, owning_domain, node_agent_state,
 node_agent_reason, update_path, expected_agent_version, observed_agent_version, cert_issuer_fingerprint,
 ingress_trust_fingerprint, host_fingerprint, terminal_stream_probe, workload_impact, health, gate,
 connectivity_mode, rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind, replay_required,
 last_seen_at, attention_score, version, updated_at)`

const insertProgress = `INSERT INTO consumer_progress (consumer, partition, watermark, events, findings_open,
 updated_at, version)`

// Write inserts the batches as one write, each table in one insert of
// their rows in order (a joiner writes the outputs of its partitions
// together): history first, then current rows, with the node statuses
// beside them on a second connection; then the summaries, then
// progress, so that neither a summary nor the progress ever claims more
// than drift_evidence holds. The node statuses are the largest table of
// a batch, and writing them beside the findings lets ClickHouse insert
// both at once (an insert is mostly one server thread) instead of the
// poll loop waiting for their sum.
//
// Values of plain columns are appended through pointers, which an
// interface holds without a copy on the heap; LowCardinality columns are
// keyed by value in clickhouse-go, so their strings go by value.
func (c *ClickHouse) Write(ctx context.Context, bs ...*Batch) error {
	now := c.now().UTC()
	var nodes sync.WaitGroup
	var nodesErr error
	if count(bs, func(b *Batch) int { return len(b.Nodes) }) > 0 {
		nodes.Go(func() { nodesErr = c.writeNodes(ctx, bs, now) })
	}
	err := c.writeFindings(ctx, bs, now)
	nodes.Wait()
	if err != nil {
		return err
	}
	if nodesErr != nil {
		return nodesErr
	}
	if err := c.writeSummaries(ctx, bs); err != nil {
		return err
	}
	if count(bs, func(b *Batch) int { return len(b.Progress) }) > 0 {
		batch, err := c.conn.PrepareBatch(ctx, insertProgress)
		if err != nil {
			return fmt.Errorf("prepare consumer_progress insert: %w", err)
		}
		version := uint64(now.UnixNano())
		for _, b := range bs {
			for _, p := range b.Progress {
				if err := batch.Append(p.Consumer, uint32(p.Partition), dt(p.Watermark), p.Events, p.FindingsOpen, now, version); err != nil {
					return fmt.Errorf("append consumer_progress row: %w", err)
				}
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert consumer_progress: %w", err)
		}
	}
	return nil
}

// count sums n over bs.
func count(bs []*Batch, n func(*Batch) int) int {
	total := 0
	for _, b := range bs {
		total += n(b)
	}
	return total
}

// writeFindings inserts the batches' history, then their current rows.
func (c *ClickHouse) writeFindings(ctx context.Context, bs []*Batch, now time.Time) error {
	// ts holds a row's DateTime values, reused row after row: the columns
	// copy them at once.
	var ts [6]time.Time
	if count(bs, func(b *Batch) int { return len(b.History) }) > 0 {
		batch, err := c.conn.PrepareBatch(ctx, insertHistory)
		if err != nil {
			return fmt.Errorf("prepare drift_history insert: %w", err)
		}
		for _, b := range bs {
			for i := range b.History {
				f := &b.History[i]
				ts[0] = eventTime(f)
				if err := batch.Append(&f.EvidenceID, &f.Version, f.Transition, f.Class.String(), f.Severity,
					f.Status, f.Posture, f.ExpectedState, f.ObservedState, &f.ObservedVersion, &f.RetryCount,
					&ts[0], &f.CorrelationID); err != nil {
					return fmt.Errorf("append drift_history row: %w", err)
				}
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert drift_history: %w", err)
		}
	}
	if count(bs, func(b *Batch) int { return len(b.Current) }) > 0 {
		batch, err := c.conn.PrepareBatch(ctx, insertEvidence)
		if err != nil {
			return fmt.Errorf("prepare drift_evidence insert: %w", err)
		}
		ts[5] = now
		for _, b := range bs {
			for i := range b.Current {
				f := &b.Current[i]
				ts[0], ts[1], ts[2], ts[3], ts[4] = dt(f.ObservedAt), dt(f.FirstSeenAt), dt(f.LastSeenAt), dt(f.ResolvedAt), dt(f.NextAttemptAt)
				if err := batch.Append(&f.EvidenceID, &f.CorrelationID, f.ResourceFamily, f.ProductID,
					f.OwningDomain, f.OwningPackage, f.DomainID, f.RecordType, &f.RecordID, f.ExpectedState,
					&f.ExpectedVersion, f.Provider, &f.ProviderID, f.ObservedState, &f.ObservedVersion,
					&ts[0], f.Class.String(), f.Severity, f.Status, &ts[1], &ts[2],
					&ts[3], &f.RetryCount, f.Posture, &ts[4], &f.Runbook, &f.AttentionScore,
					&f.Version, &ts[5]); err != nil {
					return fmt.Errorf("append drift_evidence row: %w", err)
				}
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert drift_evidence: %w", err)
		}
	}
	return nil
}

// writeNodes inserts the batches' node statuses.
func (c *ClickHouse) writeNodes(ctx context.Context, bs []*Batch, now time.Time) error {
	batch, err := c.conn.PrepareBatch(ctx, insertNodes)
	if err != nil {
		return fmt.Errorf("prepare node_agent_status insert: %w", err)
	}
	var lastSeen time.Time
	var replay uint8
	for _, b := range bs {
		for i := range b.Nodes {
			n := &b.Nodes[i]
			replay = 0
			if n.ReplayRequired {
				replay = 1
			}
			lastSeen = dt(n.LastSeenAt)
			if err := batch.Append(&n.NodeID, n.DomainID, n.OwningDomain, n.State, n.Reason, n.UpdatePath,
				&n.ExpectedAgentVersion, &n.ObservedAgentVersion, &n.CertIssuerFingerprint, &n.IngressTrustFingerprint,
				&n.HostFingerprint, n.TerminalStreamProbe, n.WorkloadImpact, n.Health, n.Gate, n.ConnectivityMode,
				&n.RTTMs, &n.LossPct, &n.BandwidthKbps, &n.BacklogMessages, &n.SecondsBehind, &replay,
				&lastSeen, &n.AttentionScore, &n.Version, &now); err != nil {
				return fmt.Errorf("append node_agent_status row: %w", err)
			}
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert node_agent_status: %w", err)
	}
	return nil
}

// eventTime is the event time of a transition.
func eventTime(f *drift.Finding) time.Time {
	if f.Transition == drift.TransitionResolved {
		return dt(f.ResolvedAt)
	}
	return dt(f.LastSeenAt)
}

// epoch is what a zero time is stored as (DateTime cannot hold year 1).
var epoch = time.Unix(0, 0).UTC()

func dt(t time.Time) time.Time {
	if t.IsZero() || t.Before(epoch) {
		return epoch
	}
	return t.UTC()
}
