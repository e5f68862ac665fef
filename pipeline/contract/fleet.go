package contract

import "time"

// Registry event types of the fleet core (CONTRACT 8.2): facts every
// partition needs, broadcast like scan markers on platform.records.
const (
	TypeArtifact     = "fleet.artifact"
	TypePolicyBundle = "fleet.policy_bundle"
)

// Artifact is a signed software payload of the registry.
type Artifact struct {
	ArtifactID    string `json:"artifact_id"`
	Version       string `json:"version"`
	Digest        string `json:"digest"`
	SignedBy      string `json:"signed_by,omitempty"`
	SBOMRef       string `json:"sbom_ref,omitempty"`
	ProvenanceRef string `json:"provenance_ref,omitempty"`
	Revoked       bool   `json:"revoked,omitempty"`
}

// PolicyBundle is a desired-state definition rolled out to nodes: nodes
// not at TargetVersion by Deadline are behind.
type PolicyBundle struct {
	PolicyBundleID string    `json:"policy_bundle_id"`
	TargetVersion  string    `json:"target_version"`
	ArtifactID     string    `json:"artifact_id"`
	Domains        []string  `json:"domains,omitempty"` // empty: every domain
	Deadline       time.Time `json:"deadline"`
}

// NodeKind is the kind of a node (CONTRACT 8.1).
type NodeKind string

// Node kinds.
const (
	NodeKindEdge    NodeKind = "EDGE"
	NodeKindDC      NodeKind = "DC"
	NodeKindGateway NodeKind = "GATEWAY"
	NodeKindRelay   NodeKind = "RELAY"
	NodeKindVirtual NodeKind = "VIRTUAL"
)

// NodeKinds lists the node kinds in a stable order.
var NodeKinds = []NodeKind{NodeKindEdge, NodeKindDC, NodeKindGateway, NodeKindRelay, NodeKindVirtual}

// LifecycleIntent is the platform's intent for a node (CONTRACT 8.1); a
// record without one means IntentActive.
type LifecycleIntent string

// Lifecycle intents.
const (
	IntentProvisioning    LifecycleIntent = "PROVISIONING"
	IntentEnrolled        LifecycleIntent = "ENROLLED"
	IntentActive          LifecycleIntent = "ACTIVE"
	IntentDecommissioning LifecycleIntent = "DECOMMISSIONING"
	IntentRetired         LifecycleIntent = "RETIRED"
)

// LifecycleIntents lists the intents in lifecycle order.
var LifecycleIntents = []LifecycleIntent{IntentProvisioning, IntentEnrolled, IntentActive, IntentDecommissioning, IntentRetired}

// MasterOfRecord is the authority level that declares a node's desired
// state (CONTRACT 8.1); operator keys may be scoped to levels (9.1).
type MasterOfRecord string

// Authority levels.
const (
	MasterGlobal MasterOfRecord = "GLOBAL"
	MasterRegion MasterOfRecord = "REGION"
	MasterLocal  MasterOfRecord = "LOCAL"
)

// MastersOfRecord lists the authority levels, widest first.
var MastersOfRecord = []MasterOfRecord{MasterGlobal, MasterRegion, MasterLocal}

// Phase is the coarse lifecycle phase of a node (seed 004).
type Phase string

// Lifecycle phases of seed 004.
const (
	PhaseProvisioning    Phase = "PROVISIONING"
	PhaseEnrolled        Phase = "ENROLLED"
	PhaseActive          Phase = "ACTIVE"
	PhaseUpdating        Phase = "UPDATING"
	PhaseDegraded        Phase = "DEGRADED"
	PhaseQuarantined     Phase = "QUARANTINED"
	PhaseDecommissioning Phase = "DECOMMISSIONING"
	PhaseRetired         Phase = "RETIRED"
)

// Phases lists the eight phases in lifecycle order.
var Phases = []Phase{PhaseProvisioning, PhaseEnrolled, PhaseActive, PhaseUpdating, PhaseDegraded, PhaseQuarantined, PhaseDecommissioning, PhaseRetired}
