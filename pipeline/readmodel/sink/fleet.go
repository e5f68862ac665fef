package sink

import (
	"context"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// Fleet is what the fleet core (docs/fleet-core.md) adds to a batch.
type Fleet struct {
	// Lifecycle holds the lifecycle transitions of the batch, in order
	// (node_lifecycle_history: (node_id, seq) rows that a replay repeats
	// and ReplacingMergeTree collapses).
	Lifecycle Packed[nodeagent.Transition]
	// Rollouts holds the rollout counts of a partition that changed
	// (rollout_status).
	Rollouts []Rollout
	// SyncDebt holds the sync-debt minutes of a partition
	// (sync_debt_minute).
	SyncDebt []SyncDebt
	// Artifacts and Bundles hold the registry entries applied (partition
	// 0's joiner writes them: every partition holds the same registry).
	Artifacts []Artifact
	Bundles   []Bundle
}

func (f *Fleet) empty() bool {
	return f.Lifecycle.Len() == 0 && len(f.Rollouts) == 0 && len(f.SyncDebt) == 0 && len(f.Artifacts) == 0 && len(f.Bundles) == 0
}

func (f *Fleet) reset() {
	f.Lifecycle.Reset()
	f.Rollouts, f.SyncDebt = f.Rollouts[:0], f.SyncDebt[:0]
	f.Artifacts, f.Bundles = f.Artifacts[:0], f.Bundles[:0]
}

// Rollout is a rollout_status row: a partition's counts of a bundle in a
// domain.
type Rollout struct {
	nodeagent.RolloutRow
	Partition int32
}

// SyncDebt is a sync_debt_minute row of a partition. Version is the
// minute's end in microseconds: a replay writes the same row.
type SyncDebt struct {
	nodeagent.SyncDebtRow
	Partition int32
}

// Artifact is a fleet_artifacts row: the registry's newest entry, as
// applied at OccurredAt.
type Artifact struct {
	contract.Artifact
	OccurredAt time.Time
}

// Bundle is a policy_bundles row.
type Bundle struct {
	contract.PolicyBundle
	OccurredAt time.Time
}

// version is a registry row's version: its occurred_at in microseconds,
// the order the registry keeps entries in.
func version(at time.Time) uint64 { return uint64(max(at.UnixMicro(), 0)) }

type (
	lifecycleRow = nodeagent.Transition
	rolloutRow   = Rollout
	syncDebtRow  = SyncDebt
	artifactRow  = Artifact
	bundleRow    = Bundle
)

var lifecycleTable = readmodel.NewTable("node_lifecycle_history",
	readmodel.String("node_id", func(t *lifecycleRow) string { return t.NodeID }),
	readmodel.UInt64("seq", func(t *lifecycleRow) uint64 { return t.Seq }),
	readmodel.String("domain_id", func(t *lifecycleRow) string { return t.DomainID }),
	readmodel.String("from_phase", func(t *lifecycleRow) string { return string(t.FromPhase) }),
	readmodel.String("from_state", func(t *lifecycleRow) string { return string(t.FromState) }),
	readmodel.String("to_phase", func(t *lifecycleRow) string { return string(t.ToPhase) }),
	readmodel.String("to_state", func(t *lifecycleRow) string { return string(t.ToState) }),
	readmodel.String("reason", func(t *lifecycleRow) string { return string(t.Reason) }),
	readmodel.DateTime("at", func(t *lifecycleRow) time.Time { return readmodel.Epoch(t.At) }),
	readmodel.String("correlation_id", func(t *lifecycleRow) string { return t.CorrelationID }),
	readmodel.Now[lifecycleRow]("updated_at"),
)

var rolloutTable = readmodel.NewTable("rollout_status",
	readmodel.String("policy_bundle_id", func(r *rolloutRow) string { return r.PolicyBundleID }),
	readmodel.String("domain_id", func(r *rolloutRow) string { return r.DomainID }),
	readmodel.UInt32("partition", func(r *rolloutRow) uint32 { return uint32(r.Partition) }),
	readmodel.String("target_version", func(r *rolloutRow) string { return r.TargetVersion }),
	readmodel.String("artifact_id", func(r *rolloutRow) string { return r.ArtifactID }),
	readmodel.DateTime("deadline", func(r *rolloutRow) time.Time { return readmodel.Epoch(r.Deadline) }),
	readmodel.UInt32("nodes", func(r *rolloutRow) uint32 { return r.Nodes }),
	readmodel.UInt32("at_target", func(r *rolloutRow) uint32 { return r.AtTarget }),
	readmodel.UInt32("updating", func(r *rolloutRow) uint32 { return r.Updating }),
	readmodel.UInt32("behind", func(r *rolloutRow) uint32 { return r.Behind }),
	readmodel.UInt32("failed", func(r *rolloutRow) uint32 { return r.Failed }),
	readmodel.UInt32("pending", func(r *rolloutRow) uint32 { return r.Pending }),
	readmodel.DateTime("as_of", func(r *rolloutRow) time.Time { return readmodel.Epoch(r.AsOf) }),
	readmodel.UInt64("version", func(r *rolloutRow) uint64 { return r.Version }),
	readmodel.Now[rolloutRow]("updated_at"),
)

var syncDebtTable = readmodel.NewTable("sync_debt_minute",
	readmodel.String("domain_id", func(r *syncDebtRow) string { return r.DomainID }),
	readmodel.String("relay_id", func(r *syncDebtRow) string { return r.RelayID }),
	readmodel.DateTime("minute", func(r *syncDebtRow) time.Time { return readmodel.Epoch(r.Minute) }),
	readmodel.UInt32("partition", func(r *syncDebtRow) uint32 { return uint32(r.Partition) }),
	readmodel.UInt32("nodes", func(r *syncDebtRow) uint32 { return r.Nodes }),
	readmodel.Int64("max_seconds_behind", func(r *syncDebtRow) int64 { return r.MaxSecondsBehind }),
	readmodel.Int64("backlog_messages", func(r *syncDebtRow) int64 { return r.BacklogMessages }),
	readmodel.UInt64("version", func(r *syncDebtRow) uint64 { return version(r.Minute) }),
	readmodel.Now[syncDebtRow]("updated_at"),
)

var artifactTable = readmodel.NewTable("fleet_artifacts",
	readmodel.String("artifact_id", func(a *artifactRow) string { return a.ArtifactID }),
	readmodel.String("artifact_version", func(a *artifactRow) string { return a.Version }),
	readmodel.String("digest", func(a *artifactRow) string { return a.Digest }),
	readmodel.String("signed_by", func(a *artifactRow) string { return a.SignedBy }),
	readmodel.String("sbom_ref", func(a *artifactRow) string { return a.SBOMRef }),
	readmodel.String("provenance_ref", func(a *artifactRow) string { return a.ProvenanceRef }),
	readmodel.Bool("revoked", func(a *artifactRow) bool { return a.Revoked }),
	readmodel.DateTime("occurred_at", func(a *artifactRow) time.Time { return readmodel.Epoch(a.OccurredAt) }),
	readmodel.UInt64("version", func(a *artifactRow) uint64 { return version(a.OccurredAt) }),
	readmodel.Now[artifactRow]("updated_at"),
)

var bundleTable = readmodel.NewTable("policy_bundles",
	readmodel.String("policy_bundle_id", func(b *bundleRow) string { return b.PolicyBundleID }),
	readmodel.String("target_version", func(b *bundleRow) string { return b.TargetVersion }),
	readmodel.String("artifact_id", func(b *bundleRow) string { return b.ArtifactID }),
	readmodel.Strings("domains", func(b *bundleRow) []string { return b.Domains }),
	readmodel.DateTime("deadline", func(b *bundleRow) time.Time { return readmodel.Epoch(b.Deadline) }),
	readmodel.DateTime("occurred_at", func(b *bundleRow) time.Time { return readmodel.Epoch(b.OccurredAt) }),
	readmodel.UInt64("version", func(b *bundleRow) uint64 { return version(b.OccurredAt) }),
	readmodel.Now[bundleRow]("updated_at"),
)

// writeFleet inserts the fleet core's rows of bs, each table in one
// insert (none when a table has no rows).
func (c *ClickHouse) writeFleet(ctx context.Context, now time.Time, bs []*Batch) error {
	if err := lifecycleTable.InsertBlocks(ctx, c.conn, now, Blocks(bs, func(b *Batch) *Packed[lifecycleRow] { return &b.Fleet.Lifecycle })); err != nil {
		return err
	}
	if err := rolloutTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []rolloutRow { return b.Fleet.Rollouts })...); err != nil {
		return err
	}
	if err := syncDebtTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []syncDebtRow { return b.Fleet.SyncDebt })...); err != nil {
		return err
	}
	if err := artifactTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []artifactRow { return b.Fleet.Artifacts })...); err != nil {
		return err
	}
	return bundleTable.Insert(ctx, c.conn, now, partsOf(bs, func(b *Batch) []bundleRow { return b.Fleet.Bundles })...)
}
