package contract

// The fleet core's derived vocabulary (CONTRACT 8.3, docs/fleet-core.md):
// the lifecycle's finer states and transition reasons, the authority and
// supply-chain states and the rollout categories of node_agent_status.

// LifecycleState is the finer state within a lifecycle phase: the
// connectivity mode while ACTIVE (LIVE spelled LIVE_OK), otherwise what
// put the node in its phase.
type LifecycleState string

// Lifecycle states.
const (
	StateRetired            LifecycleState = "RETIRED"
	StateDecommissioning    LifecycleState = "DECOMMISSIONING"
	StateOperatorQuarantine LifecycleState = "OPERATOR_QUARANTINE"
	StateSupplyChain        LifecycleState = "SUPPLY_CHAIN"
	StateAuthorityConflict  LifecycleState = "AUTHORITY_CONFLICT"
	StateGateBlocked        LifecycleState = "GATE_BLOCKED"
	StateProvisioning       LifecycleState = "PROVISIONING"
	StateEnrolled           LifecycleState = "ENROLLED"
	StateUpdateFailed       LifecycleState = "UPDATE_FAILED"
	StateHealthDegraded     LifecycleState = "HEALTH_DEGRADED"
	StateHealthFailed       LifecycleState = "HEALTH_FAILED"
	StateUpdating           LifecycleState = "UPDATING"
	StateLiveOK             LifecycleState = "LIVE_OK"
	StateDelayed            LifecycleState = "DELAYED"
	StateEdgeCached         LifecycleState = "EDGE_CACHED"
	StateAutonomous         LifecycleState = "AUTONOMOUS"
	StateDisconnected       LifecycleState = "DISCONNECTED"
	StateReturning          LifecycleState = "RETURNING"
	StateReplaying          LifecycleState = "REPLAYING"
)

// LifecycleStates lists the lifecycle states in rule order, the
// connectivity states last in spectrum order.
var LifecycleStates = []LifecycleState{StateRetired, StateDecommissioning, StateOperatorQuarantine, StateSupplyChain,
	StateAuthorityConflict, StateGateBlocked, StateProvisioning, StateEnrolled, StateUpdateFailed, StateHealthDegraded,
	StateHealthFailed, StateUpdating, StateLiveOK, StateDelayed, StateEdgeCached, StateAutonomous, StateDisconnected,
	StateReturning, StateReplaying}

// ModeState returns the lifecycle state of an ACTIVE node in connectivity
// mode m: the mode itself, with LIVE spelled LIVE_OK.
func ModeState(m ConnectivityMode) LifecycleState {
	if m == ModeLive {
		return StateLiveOK
	}
	return LifecycleState(m)
}

// LifecycleRule names the lifecycle rule that matched at a transition
// (node_lifecycle_history.reason).
type LifecycleRule string

// Transition reasons, one per rule of docs/fleet-core.md.
const (
	RuleRetired            LifecycleRule = "retired"
	RuleDecommissioning    LifecycleRule = "decommissioning"
	RuleOperatorQuarantine LifecycleRule = "operator_quarantine"
	RuleSupplyChain        LifecycleRule = "supply_chain"
	RuleAuthorityConflict  LifecycleRule = "authority_conflict"
	RuleGateBlocked        LifecycleRule = "gate_blocked"
	RuleProvisioning       LifecycleRule = "provisioning"
	RuleEnrolled           LifecycleRule = "enrolled"
	RuleHealthDegraded     LifecycleRule = "health_degraded"
	RuleHealthFailed       LifecycleRule = "health_failed"
	RuleUpdateFailed       LifecycleRule = "update_failed"
	RuleUpdating           LifecycleRule = "updating"
	RuleConnectivity       LifecycleRule = "connectivity"
)

// LifecycleRules lists the transition reasons in rule order.
var LifecycleRules = []LifecycleRule{RuleRetired, RuleDecommissioning, RuleOperatorQuarantine,
	RuleSupplyChain, RuleAuthorityConflict, RuleGateBlocked, RuleProvisioning, RuleEnrolled,
	RuleHealthDegraded, RuleHealthFailed, RuleUpdateFailed, RuleUpdating, RuleConnectivity}

// AuthorityState is node_agent_status.authority: ” without controller
// evidence.
type AuthorityState string

// Authority states.
const (
	AuthorityNone       AuthorityState = ""
	AuthorityOK         AuthorityState = "ok"
	AuthorityNotListed  AuthorityState = "controller_not_listed"
	AuthoritySplitBrain AuthorityState = "split_brain"
)

// AuthorityStates lists the authority states with evidence.
var AuthorityStates = []AuthorityState{AuthorityOK, AuthorityNotListed, AuthoritySplitBrain}

// SupplyChainState is node_agent_status.supply_chain: ” when the node
// reports no artifact.
type SupplyChainState string

// Supply-chain states.
const (
	SupplyChainNone           SupplyChainState = ""
	SupplyChainOK             SupplyChainState = "ok"
	SupplyChainUnknown        SupplyChainState = "artifact_unknown"
	SupplyChainRevoked        SupplyChainState = "artifact_revoked"
	SupplyChainDigestMismatch SupplyChainState = "artifact_digest_mismatch"
)

// SupplyChainStates lists the supply-chain states with evidence.
var SupplyChainStates = []SupplyChainState{SupplyChainOK, SupplyChainUnknown, SupplyChainRevoked, SupplyChainDigestMismatch}

// RolloutCategory is where a node stands in its policy bundle's rollout
// (node_agent_status.rollout, the counts of rollout_status).
type RolloutCategory string

// Rollout categories, in the order they are tested.
const (
	RolloutAtTarget RolloutCategory = "at_target"
	RolloutFailed   RolloutCategory = "failed"
	RolloutBehind   RolloutCategory = "behind"
	RolloutUpdating RolloutCategory = "updating"
	RolloutPending  RolloutCategory = "pending"
)

// RolloutCategories lists the rollout categories in the order they are
// tested.
var RolloutCategories = []RolloutCategory{RolloutAtTarget, RolloutFailed, RolloutBehind, RolloutUpdating, RolloutPending}
