package apitypes

import (
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// The fleet core's vocabulary as plain strings (CONTRACT section 8).
var (
	Phases           = contract.Strings(contract.Phases)
	LifecycleIntents = contract.Strings(contract.LifecycleIntents)
	NodeKinds        = contract.Strings(contract.NodeKinds)
	MastersOfRecord  = contract.Strings(contract.MastersOfRecord)
)

// NodeFleet is the fleet core's part of a node's status row
// (node_agent_status, migration 013): its lifecycle, authority, rollout
// and supply chain as the joiner derived them, and the record's tags.
type NodeFleet struct {
	Tags            []string   `json:"tags"` // never null
	NodeKind        string     `json:"node_kind"`
	LifecycleIntent string     `json:"lifecycle_intent"`
	Phase           string     `json:"phase"`
	State           string     `json:"state"`
	PhaseSince      *time.Time `json:"phase_since"` // null: no transition yet
	Transitions     uint64     `json:"transitions"`
	MasterOfRecord  string     `json:"master_of_record"`
	ControllerIDs   []string   `json:"controller_ids"` // never null
	ControllerID    string     `json:"controller_id"`
	Authority       string     `json:"authority"` // controller_not_listed, split_brain, ok, or "" (no evidence)
	RelayID         string     `json:"relay_id"`  // "": the node reaches the platform directly
	PolicyBundleID  string     `json:"policy_bundle_id"`
	TargetVersion   string     `json:"target_version"`
	ReportedVersion string     `json:"reported_version"`
	Rollout         string     `json:"rollout"` // at_target, failed, behind, updating, pending, or ""
	ArtifactID      string     `json:"artifact_id"`
	ArtifactDigest  string     `json:"artifact_digest"`
	SupplyChain     string     `json:"supply_chain"` // artifact_unknown, artifact_revoked, artifact_digest_mismatch, ok, or ""
	UptimeS         int64      `json:"uptime_s"`
	// RecentEvents are Kafka coordinates topic/partition/offset of the
	// last events that touched the node, newest first; never null.
	RecentEvents []string `json:"recent_events"`
}

// Transition is one lifecycle transition of a node
// (node_lifecycle_history).
type Transition struct {
	Seq           uint64    `json:"seq"` // the node's transition count, from 1
	FromPhase     string    `json:"from_phase"`
	FromState     string    `json:"from_state"`
	ToPhase       string    `json:"to_phase"`
	ToState       string    `json:"to_state"`
	Reason        string    `json:"reason"` // the lifecycle rule that matched
	At            time.Time `json:"at"`     // event time
	CorrelationID string    `json:"correlation_id"`
}

// Timeline is the answer of GET /v1/nodes/{node_id}/timeline.
type Timeline struct {
	NodeID      string       `json:"node_id"`
	Transitions []Transition `json:"transitions"` // newest first; never null
	Count       int          `json:"count"`
}

// Lifecycle is a node's current phase and state.
type Lifecycle struct {
	Intent      string     `json:"intent"`
	NodeKind    string     `json:"node_kind"`
	Phase       string     `json:"phase"`
	State       string     `json:"state"`
	Since       *time.Time `json:"since"`
	Transitions uint64     `json:"transitions"`
	// Recent are the latest transitions, newest first; never null.
	Recent []Transition `json:"recent"`
}

// Authority is who declares a node's desired state and whom it obeys.
type Authority struct {
	MasterOfRecord string   `json:"master_of_record"`
	ControllerIDs  []string `json:"controller_ids"` // the record's; never null
	ControllerID   string   `json:"controller_id"`  // the newest heartbeat's
	State          string   `json:"state"`
}

// Artifact is one artifact of the registry (fleet_artifacts).
type Artifact struct {
	ArtifactID    string     `json:"artifact_id"`
	Version       string     `json:"version"`
	Digest        string     `json:"digest"`
	SignedBy      string     `json:"signed_by"`
	SBOMRef       string     `json:"sbom_ref"`
	ProvenanceRef string     `json:"provenance_ref"`
	Revoked       bool       `json:"revoked"`
	OccurredAt    *time.Time `json:"occurred_at"`
}

// SupplyChain is what a node runs against the registry.
type SupplyChain struct {
	ArtifactID     string `json:"artifact_id"`
	ReportedDigest string `json:"reported_digest"`
	State          string `json:"state"`
	// Registry is the artifact's registry entry; null when the registry
	// does not hold it.
	Registry *Artifact `json:"registry"`
}

// Replay is how far a returning node is through replaying its backlog.
type Replay struct {
	ConnectivityMode string `json:"connectivity_mode"`
	ReplayRequired   bool   `json:"replay_required"`
	BacklogMessages  int64  `json:"backlog_messages"`
	SecondsBehind    int64  `json:"seconds_behind"`
}

// DiffField is one field of a node's desired state against its actual
// one.
type DiffField struct {
	Field   string `json:"field"`
	Desired string `json:"desired"`
	Actual  string `json:"actual"`
	// Equal is true when both sides are known and agree. Known is false
	// when a side is not reported; Equal is then false too.
	Equal bool   `json:"equal"`
	Known bool   `json:"known"`
	Note  string `json:"note,omitempty"`
}

// Observation statuses.
const (
	ObservationFetched     = "fetched"     // the record was read from Kafka
	ObservationExpired     = "expired"     // the record is past retention (or compacted away)
	ObservationUnavailable = "unavailable" // Kafka did not answer in time, or is not configured
	ObservationInvalid     = "invalid"     // the coordinate is malformed
)

// Observation is one recent event of a node, read from Kafka by its
// coordinate.
type Observation struct {
	Coordinate string     `json:"coordinate"` // topic/partition/offset
	Topic      string     `json:"topic"`
	Partition  int32      `json:"partition"`
	Offset     int64      `json:"offset"`
	Status     string     `json:"status"`
	EventType  string     `json:"event_type,omitempty"`
	OccurredAt *time.Time `json:"occurred_at,omitempty"`
	Producer   string     `json:"producer,omitempty"`
	EventID    string     `json:"event_id,omitempty"`
	// Summary is the payload's scalar fields, "name=value" joined by
	// spaces and cut to a few hundred bytes.
	Summary string `json:"summary,omitempty"`
	Error   string `json:"error,omitempty"`
}

// RolloutCounts are the nodes of one rollout by category.
type RolloutCounts struct {
	Nodes    uint64 `json:"nodes"`
	AtTarget uint64 `json:"at_target"`
	Updating uint64 `json:"updating"`
	Behind   uint64 `json:"behind"`
	Failed   uint64 `json:"failed"`
	Pending  uint64 `json:"pending"`
}

// RolloutRow is the rollout of one policy bundle in one domain.
type RolloutRow struct {
	PolicyBundleID string     `json:"policy_bundle_id"`
	DomainID       string     `json:"domain_id"`
	TargetVersion  string     `json:"target_version"`
	ArtifactID     string     `json:"artifact_id"`
	Deadline       *time.Time `json:"deadline"`
	RolloutCounts
}

// RolloutDomain is one domain of a bundle's rollout.
type RolloutDomain struct {
	DomainID string `json:"domain_id"`
	RolloutCounts
}

// Rollout is the rollout of one policy bundle over its domains.
type Rollout struct {
	PolicyBundleID string     `json:"policy_bundle_id"`
	TargetVersion  string     `json:"target_version"`
	ArtifactID     string     `json:"artifact_id"`
	Deadline       *time.Time `json:"deadline"`
	RolloutCounts
	Domains []RolloutDomain `json:"domains"` // by domain_id; never null
}

// Rollouts is the answer of GET /v1/rollouts.
type Rollouts struct {
	Rollouts []Rollout `json:"rollouts"` // by policy_bundle_id; never null
}

// RelayRow is one relay of one domain ("" = direct connections).
type RelayRow struct {
	DomainID         string `json:"domain_id"`
	RelayID          string `json:"relay_id"`
	Nodes            uint64 `json:"nodes"`
	MaxSecondsBehind int64  `json:"max_seconds_behind"`
	BacklogMessages  int64  `json:"backlog_messages"`
}

// RelayDomain is the relay topology of one domain.
type RelayDomain struct {
	DomainID         string     `json:"domain_id"`
	Nodes            uint64     `json:"nodes"`
	MaxSecondsBehind int64      `json:"max_seconds_behind"` // worst of its relays
	BacklogMessages  int64      `json:"backlog_messages"`
	Relays           []RelayRow `json:"relays"` // worst sync debt first; never null
}

// Relays is the answer of GET /v1/relays.
type Relays struct {
	Domains []RelayDomain `json:"domains"` // by domain_id; never null
}

// SyncDebtPoint is the sync debt of one (domain, relay) in one minute.
type SyncDebtPoint struct {
	DomainID         string    `json:"domain_id"`
	RelayID          string    `json:"relay_id"`
	Minute           time.Time `json:"minute"`
	Nodes            uint64    `json:"nodes"`
	MaxSecondsBehind int64     `json:"max_seconds_behind"`
	BacklogMessages  int64     `json:"backlog_messages"`
}

// SyncDebtSeries is the timeline of one (domain, relay).
type SyncDebtSeries struct {
	DomainID string          `json:"domain_id"`
	RelayID  string          `json:"relay_id"`
	Points   []SyncDebtPoint `json:"points"` // by minute
}

// SyncDebt is the answer of GET /v1/syncdebt.
type SyncDebt struct {
	Series []SyncDebtSeries `json:"series"` // by domain_id, relay_id; never null
	Points int              `json:"points"`
	// Truncated is true when the limit cut the points: narrow from/to.
	Truncated bool `json:"truncated"`
}
