package contract

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
