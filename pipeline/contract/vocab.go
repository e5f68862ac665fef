package contract

// The contract's vocabularies, every one in this file: the closed sets of
// string values that payload fields, findings, node states and operator
// actions take. Each has its constants beside their type and one exported
// list (Families, Healths, Actions, ...), the table everything else is
// derived from: the validator's check (Valid, oneOf) and the allowed-value
// lists of the query API (Strings). A value added to a vocabulary is added
// to its list, and nowhere else.

// Valid reports whether v is one of the values of vocabulary vs. A linear
// scan of a vocabulary's few values is as fast as a switch over them for
// the first and about a nanosecond slower for each value before the match.
func Valid[T ~string](vs []T, v string) bool {
	for _, x := range vs {
		if string(x) == v {
			return true
		}
	}
	return false
}

// Strings returns the values of a vocabulary list as plain strings, for
// the places that take any string (query filters, allowed-value lists).
func Strings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Payload vocabularies of CONTRACT section 3.

// Resource families (CONTRACT 3.1).
const (
	FamilyGPUaaS       = "gpuaas_allocation"
	FamilyAppRuntime   = "app_runtime"
	FamilyStorage      = "storage"
	FamilyModelServing = "model_serving"
	FamilyBillingUsage = "billing_usage"
)

// Families lists the resource families in a stable order.
var Families = []string{FamilyGPUaaS, FamilyAppRuntime, FamilyStorage, FamilyModelServing, FamilyBillingUsage}

// Providers (CONTRACT 3.1).
const (
	ProviderMAAS             = "maas"
	ProviderNodeAgent        = "node_agent"
	ProviderAppRuntime       = "app_runtime"
	ProviderStorage          = "storage_provider"
	ProviderGateway          = "gateway"
	ProviderBillingIngestion = "billing_ingestion"
)

// Providers lists the providers in a stable order.
var Providers = []string{ProviderMAAS, ProviderNodeAgent, ProviderAppRuntime, ProviderStorage, ProviderGateway, ProviderBillingIngestion}

// Findings (CONTRACT sections 4 and 5).

// Classification names what kind of drift a finding is (CONTRACT section
// 4). It is the drift_evidence.classification column and the first part of
// every evidence_id.
type Classification string

// Classifications of CONTRACT section 4.
const (
	ClassOrphan   Classification = "orphan_provider_resource"
	ClassMissing  Classification = "missing_provider_resource"
	ClassStale    Classification = "stale_lifecycle_state"
	ClassIdentity Classification = "identity_mismatch"
	ClassQuota    Classification = "quota_or_capacity_mismatch"
	ClassRoute    Classification = "route_or_dns_mismatch"
	// The fleet core's findings (CONTRACT 8.3), on a node's identity.
	ClassAuthority   Classification = "authority_conflict"
	ClassSupplyChain Classification = "supply_chain_violation"
	ClassBilling     Classification = "billing_mismatch"
)

// Classifications lists every classification in contract order (the heat
// map's column axis).
var Classifications = []Classification{ClassOrphan, ClassMissing, ClassStale, ClassIdentity, ClassQuota, ClassRoute,
	ClassAuthority, ClassSupplyChain, ClassBilling}

// Severity is how urgent a finding is.
type Severity string

// Severities of CONTRACT section 4.
const (
	SeverityCritical Severity = "critical"
	SeverityWarning  Severity = "warning"
)

// Severities lists the severities, most severe first.
var Severities = []Severity{SeverityCritical, SeverityWarning}

// Posture is what the platform does about an open finding (seed 000,
// evidence record action).
type Posture string

// Postures of CONTRACT section 4.
const (
	PostureRetry          Posture = "retry"
	PostureQuarantine     Posture = "quarantine"
	PostureBlockAdmission Posture = "block_admission"
	PostureOperatorReview Posture = "operator_review"
)

// FindingStatus is the status column of drift_evidence and
// billing_mismatch.
type FindingStatus string

// Finding statuses: a finding is opened once and resolved when state
// agrees again; it is never deleted.
const (
	StatusOpen     FindingStatus = "open"
	StatusResolved FindingStatus = "resolved"
)

// Transition names what changed in one drift_history row.
type Transition string

// Transitions of a drift finding.
const (
	TransitionOpened   Transition = "opened"
	TransitionUpdated  Transition = "updated"
	TransitionResolved Transition = "resolved"
	TransitionReopened Transition = "reopened"
)

// BillingKind is the kind column of billing_mismatch (CONTRACT section 5):
// which step of usage, rating and ledger disagrees.
type BillingKind string

// Billing mismatch kinds.
const (
	KindUsageNotRated    BillingKind = "usage_not_rated"
	KindRatedNotLedgered BillingKind = "rated_not_ledgered"
	KindAmountMismatch   BillingKind = "amount_mismatch"
	KindDuplicateUsage   BillingKind = "duplicate_usage"
	KindUnknownUnit      BillingKind = "unknown_unit"
	// KindConflictingUsage: a usage_id came again with other content
	// (another PayloadDigest: quantity, unit, tenant, window...). The first
	// stays rated; the finding holds both quantities.
	KindConflictingUsage BillingKind = "conflicting_usage"
	// KindWindowUnbalanced extends the contract's kinds: a conservation
	// window that does not balance after its graces. It holds a rated line
	// with no accepted usage behind it, or a ledger entry with no rated
	// line behind it (docs/billing-model.md).
	KindWindowUnbalanced BillingKind = "window_unbalanced"
)

// BillingKinds lists every billing mismatch kind in a stable order.
var BillingKinds = []BillingKind{KindUsageNotRated, KindRatedNotLedgered, KindAmountMismatch, KindDuplicateUsage, KindUnknownUnit, KindConflictingUsage, KindWindowUnbalanced}

// Node-agent evidence (CONTRACT 3.3, seeds 000 and 004).

// Gate is the release gate of a node (seed 000): whether its node-agent
// evidence lets a production release go ahead.
type Gate string

// Gates, least to most severe.
const (
	GatePass            Gate = "pass"
	GateWarning         Gate = "warning"
	GateRetry           Gate = "retry"
	GateInvestigate     Gate = "investigate"
	GateBlockProduction Gate = "block_production"
)

// Gates lists the gates, least to most severe.
var Gates = []Gate{GatePass, GateWarning, GateRetry, GateInvestigate, GateBlockProduction}

// NodeAgentState is the node_agent_state of a node (seed 000).
type NodeAgentState string

// Node-agent states.
const (
	NodeStateHealthy                NodeAgentState = "healthy"
	NodeStateStale                  NodeAgentState = "stale"
	NodeStateRecovering             NodeAgentState = "recovering"
	NodeStateOperatorActionRequired NodeAgentState = "operator_action_required"
	NodeStateSecurityActionRequired NodeAgentState = "security_action_required"
)

// NodeAgentStates lists the node-agent states in a stable order.
var NodeAgentStates = []NodeAgentState{NodeStateHealthy, NodeStateStale, NodeStateRecovering, NodeStateOperatorActionRequired, NodeStateSecurityActionRequired}

// NodeAgentReason is a node_agent_reason the pipeline derives. A
// heartbeat's own node_agent_reason is free text and is passed through
// where the rules say so (docs/node-agent-model.md).
type NodeAgentReason string

// Derived node-agent reasons.
const (
	NodeReasonClonedIdentity         NodeAgentReason = "cloned_identity_detected"
	NodeReasonCertIssuerMismatch     NodeAgentReason = "cert_issuer_mismatch"
	NodeReasonCertUntrustedByIngress NodeAgentReason = "cert_untrusted_by_ingress"
	NodeReasonHealthFailed           NodeAgentReason = "health_failed"
	NodeReasonWorkloadUnavailable    NodeAgentReason = "workload_unavailable"
	NodeReasonNoOwningRecord         NodeAgentReason = "no_owning_record"
	NodeReasonAgentDown              NodeAgentReason = "agent_down"
	NodeReasonAgentOutdated          NodeAgentReason = "agent_outdated"
	NodeReasonReplayInProgress       NodeAgentReason = "replay_in_progress"
	NodeReasonUpdateInProgress       NodeAgentReason = "update_in_progress"
	NodeReasonOperatorRecovery       NodeAgentReason = "operator_recovery_pending"
	NodeReasonHealthDegraded         NodeAgentReason = "health_degraded"
	NodeReasonWorkloadDegraded       NodeAgentReason = "workload_degraded"
	NodeReasonTerminalProbeFailed    NodeAgentReason = "terminal_probe_failed"
	NodeReasonHeartbeatOverdue       NodeAgentReason = "heartbeat_overdue"
	NodeReasonLinkDegraded           NodeAgentReason = "link_degraded"
	NodeReasonSyncDebt               NodeAgentReason = "sync_debt"
	NodeReasonEvidenceIncomplete     NodeAgentReason = "evidence_incomplete"
)

// ConnectivityMode is where a node is on the connectivity spectrum of
// seed 004.
type ConnectivityMode string

// Connectivity modes, in the order a node moves through them.
const (
	ModeLive         ConnectivityMode = "LIVE"
	ModeDelayed      ConnectivityMode = "DELAYED"
	ModeEdgeCached   ConnectivityMode = "EDGE_CACHED"
	ModeAutonomous   ConnectivityMode = "AUTONOMOUS"
	ModeDisconnected ConnectivityMode = "DISCONNECTED"
	ModeReturning    ConnectivityMode = "RETURNING"
	ModeReplaying    ConnectivityMode = "REPLAYING"
)

// ConnectivityModes lists the connectivity modes in spectrum order.
var ConnectivityModes = []ConnectivityMode{ModeLive, ModeDelayed, ModeEdgeCached, ModeAutonomous, ModeDisconnected, ModeReturning, ModeReplaying}

// Health is a heartbeat's health (CONTRACT 3.3).
type Health string

// Healths.
const (
	HealthOK       Health = "OK"
	HealthDegraded Health = "DEGRADED"
	HealthFailed   Health = "FAILED"
	HealthUnknown  Health = "UNKNOWN"
)

// Healths lists the healths in a stable order.
var Healths = []Health{HealthOK, HealthDegraded, HealthFailed, HealthUnknown}

// UpdatePath is how a node's agent is being brought to its expected
// version (CONTRACT 3.3).
type UpdatePath string

// Update paths.
const (
	UpdatePathNone                UpdatePath = "none"
	UpdatePathSelfUpdate          UpdatePath = "self_update"
	UpdatePathRecoveryEnrollment  UpdatePath = "recovery_enrollment"
	UpdatePathOperatorRebootstrap UpdatePath = "operator_rebootstrap"
	UpdatePathFullReimage         UpdatePath = "full_reimage"
)

// UpdatePaths lists the update paths in a stable order.
var UpdatePaths = []UpdatePath{UpdatePathNone, UpdatePathSelfUpdate, UpdatePathRecoveryEnrollment, UpdatePathOperatorRebootstrap, UpdatePathFullReimage}

// TerminalStreamProbe is the outcome of a heartbeat's terminal stream
// probe (CONTRACT 3.3).
type TerminalStreamProbe string

// Terminal stream probe outcomes.
const (
	ProbePassed      TerminalStreamProbe = "passed"
	ProbeFailed      TerminalStreamProbe = "failed"
	ProbeNotRequired TerminalStreamProbe = "not_required"
	ProbeNotExecuted TerminalStreamProbe = "not_executed"
)

// TerminalStreamProbes lists the probe outcomes in a stable order.
var TerminalStreamProbes = []TerminalStreamProbe{ProbePassed, ProbeFailed, ProbeNotRequired, ProbeNotExecuted}

// WorkloadImpact is what a heartbeat says the node's workloads suffer
// (CONTRACT 3.3).
type WorkloadImpact string

// Workload impacts.
const (
	ImpactNoneObserved WorkloadImpact = "none_observed"
	ImpactDegraded     WorkloadImpact = "degraded"
	ImpactUnavailable  WorkloadImpact = "unavailable"
	ImpactUnknown      WorkloadImpact = "unknown"
)

// WorkloadImpacts lists the workload impacts in a stable order.
var WorkloadImpacts = []WorkloadImpact{ImpactNoneObserved, ImpactDegraded, ImpactUnavailable, ImpactUnknown}

// The fleet core of a node's record (CONTRACT 8.1) and its phases.

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

// Operator actions (CONTRACT section 9.2).

// Action is what an operator asks to be done about a finding.
type Action string

// Actions of CONTRACT section 9.2.
const (
	ActionAcknowledge    Action = "acknowledge"
	ActionAssign         Action = "assign"
	ActionSuppress       Action = "suppress"
	ActionUnsuppress     Action = "unsuppress"
	ActionRetry          Action = "retry"
	ActionCleanup        Action = "cleanup"
	ActionQuarantineNode Action = "quarantine_node"
	ActionReleaseNode    Action = "release_node"
)

// Actions lists every action in a stable order.
var Actions = []Action{ActionAcknowledge, ActionAssign, ActionSuppress, ActionUnsuppress,
	ActionRetry, ActionCleanup, ActionQuarantineNode, ActionReleaseNode}

// ActionState is the action_state column of drift_evidence: where the
// latest request of a finding stands.
type ActionState string

// Action states. A finding no request was made for has none ("").
const (
	// ActionPending: a request was written and neither resolved nor past
	// its deadline.
	ActionPending ActionState = "pending"
	// ActionSucceeded: an observation resolved the finding while its
	// request was pending.
	ActionSucceeded ActionState = "succeeded"
	// ActionOperatorReview: the request's deadline passed with the finding
	// still open; the finding's posture is operator_review.
	ActionOperatorReview ActionState = "operator_review"
	// ActionRefused: the joiner refused the latest action in stream order
	// (the finding changed between acceptance and application).
	ActionRefused ActionState = "refused"
)

// ActionStates lists the action states in a stable order.
var ActionStates = []ActionState{ActionPending, ActionSucceeded, ActionOperatorReview, ActionRefused}

// Transitions of a finding caused by operator actions and their requests
// (drift_history rows beside those of the classifier).
const (
	TransitionAction           Transition = "action"            // an action applied
	TransitionActionRefused    Transition = "action_refused"    // an action refused in stream order
	TransitionRequestSucceeded Transition = "request_succeeded" // resolved while a request was pending
	TransitionRequestExpired   Transition = "request_expired"   // the request's deadline passed: operator_review
	TransitionSuppressionEnded Transition = "suppression_ended" // the watermark passed suppressed_until
)

// ActionReason names why an action is refused: the API's 4xx answers and
// the joiner's action_refused history rows carry it.
type ActionReason string

// Action refusal reasons.
const (
	ReasonUnknownAction      ActionReason = "unknown_action"           // action is not one of Actions
	ReasonMissingIdempotency ActionReason = "missing_idempotency_key"  // no Idempotency-Key header
	ReasonIdempotencyReused  ActionReason = "idempotency_key_reused"   // the key was used with another body
	ReasonFindingNotFound    ActionReason = "finding_not_found"        // no finding has the evidence_id
	ReasonFindingResolved    ActionReason = "finding_resolved"         // the action needs an open finding
	ReasonMissingAssignee    ActionReason = "missing_assignee"         // assign without an assignee
	ReasonBadUntil           ActionReason = "bad_until"                // suppress without a future until
	ReasonNotSuppressed      ActionReason = "not_suppressed"           // unsuppress of a finding not suppressed
	ReasonRequestPending     ActionReason = "request_pending"          // a request of the finding is still pending
	ReasonNotANode           ActionReason = "not_a_node"               // a node action on a finding that is not a node's
	ReasonNodeQuarantined    ActionReason = "node_quarantined"         // quarantine_node of a node already quarantined
	ReasonNodeNotQuarantined ActionReason = "node_not_quarantined"     // release_node of a node not quarantined
	ReasonCleanupNotOrphan   ActionReason = "cleanup_not_orphan"       // cleanup of a finding that is not an open orphan past its grace
	ReasonCleanupOwned       ActionReason = "cleanup_owned"            // cleanup while an owning record exists (or owner_ref names one)
	ReasonCleanupRollback    ActionReason = "cleanup_rollback_pending" // cleanup while a request on the identity is pending
	ReasonBadBody            ActionReason = "bad_body"                 // the body is not a JSON action
	// ReasonOutOfAuthority: an operator key whose authority_levels do not
	// hold the node's master_of_record (section 9.1) acted on the node's
	// finding; 403, or listed among a batch's refusals.
	ReasonOutOfAuthority ActionReason = "authority_out_of_scope"
)

// ActionReasons lists the refusal reasons in a stable order.
var ActionReasons = []ActionReason{ReasonUnknownAction, ReasonMissingIdempotency, ReasonIdempotencyReused,
	ReasonFindingNotFound, ReasonFindingResolved, ReasonMissingAssignee, ReasonBadUntil, ReasonNotSuppressed,
	ReasonRequestPending, ReasonNotANode, ReasonNodeQuarantined, ReasonNodeNotQuarantined,
	ReasonCleanupNotOrphan, ReasonCleanupOwned, ReasonCleanupRollback, ReasonBadBody, ReasonOutOfAuthority}
