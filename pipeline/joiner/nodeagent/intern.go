package nodeagent

import "github.com/driftline/driftline/pipeline/joiner/intern"

// sym is an interned string: versions, fingerprints, domains and the
// enumerations of a heartbeat repeat across nodes, so a node keeps 4-byte
// symbols instead of 16-byte string headers with their own copies.
type sym = intern.Sym

// Symbols interned at construction, with fixed values.
const (
	symEmpty sym = iota
	// health
	symHealthOK
	symHealthDegraded
	symHealthFailed
	symHealthUnknown
	// update_path
	symPathNone
	symPathSelfUpdate
	symPathRecoveryEnrollment
	symPathOperatorRebootstrap
	symPathFullReimage
	// terminal_stream_probe
	symProbePassed
	symProbeFailed
	symProbeNotRequired
	symProbeNotExecuted
	// workload_impact
	symImpactNoneObserved
	symImpactDegraded
	symImpactUnavailable
	symImpactUnknown
	// derived reasons
	symReasonClonedIdentity
	symReasonCertIssuerMismatch
	symReasonCertUntrustedByIngress
	symReasonHealthFailed
	symReasonWorkloadUnavailable
	symReasonNoOwningRecord
	symReasonAgentDown
	symReasonAgentOutdated
	symReasonReplayInProgress
	symReasonUpdateInProgress
	symReasonOperatorRecovery
	symReasonHealthDegraded
	symReasonWorkloadDegraded
	symReasonTerminalProbeFailed
	symReasonHeartbeatOverdue
	symReasonLinkDegraded
	symReasonSyncDebt
	symReasonEvidenceIncomplete
	numFixedSyms
)

var fixedSyms = [numFixedSyms]string{
	symEmpty:          "",
	symHealthOK:       "OK",
	symHealthDegraded: "DEGRADED",
	symHealthFailed:   "FAILED",
	symHealthUnknown:  "UNKNOWN",

	symPathNone:                "none",
	symPathSelfUpdate:          "self_update",
	symPathRecoveryEnrollment:  "recovery_enrollment",
	symPathOperatorRebootstrap: "operator_rebootstrap",
	symPathFullReimage:         "full_reimage",

	symProbePassed:      "passed",
	symProbeFailed:      "failed",
	symProbeNotRequired: "not_required",
	symProbeNotExecuted: "not_executed",

	symImpactNoneObserved: "none_observed",
	symImpactDegraded:     "degraded",
	symImpactUnavailable:  "unavailable",
	symImpactUnknown:      "unknown",

	symReasonClonedIdentity:         ReasonClonedIdentity,
	symReasonCertIssuerMismatch:     ReasonCertIssuerMismatch,
	symReasonCertUntrustedByIngress: ReasonCertUntrustedByIngress,
	symReasonHealthFailed:           ReasonHealthFailed,
	symReasonWorkloadUnavailable:    ReasonWorkloadUnavailable,
	symReasonNoOwningRecord:         ReasonNoOwningRecord,
	symReasonAgentDown:              ReasonAgentDown,
	symReasonAgentOutdated:          ReasonAgentOutdated,
	symReasonReplayInProgress:       ReasonReplayInProgress,
	symReasonUpdateInProgress:       ReasonUpdateInProgress,
	symReasonOperatorRecovery:       ReasonOperatorRecovery,
	symReasonHealthDegraded:         ReasonHealthDegraded,
	symReasonWorkloadDegraded:       ReasonWorkloadDegraded,
	symReasonTerminalProbeFailed:    ReasonTerminalProbeFailed,
	symReasonHeartbeatOverdue:       ReasonHeartbeatOverdue,
	symReasonLinkDegraded:           ReasonLinkDegraded,
	symReasonSyncDebt:               ReasonSyncDebt,
	symReasonEvidenceIncomplete:     ReasonEvidenceIncomplete,
}

// minCompactAt is the table size below which a tracker never compacts.
const minCompactAt = 4096

// newSymtab returns a table holding the fixed symbols.
func newSymtab() *intern.Table { return intern.New(fixedSyms[:]...) }
