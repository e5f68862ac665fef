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
