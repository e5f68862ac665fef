package nodeagent

import (
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/intern"
)

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
	symHealthOK:       string(contract.HealthOK),
	symHealthDegraded: string(contract.HealthDegraded),
	symHealthFailed:   string(contract.HealthFailed),
	symHealthUnknown:  string(contract.HealthUnknown),

	symPathNone:                string(contract.UpdatePathNone),
	symPathSelfUpdate:          string(contract.UpdatePathSelfUpdate),
	symPathRecoveryEnrollment:  string(contract.UpdatePathRecoveryEnrollment),
	symPathOperatorRebootstrap: string(contract.UpdatePathOperatorRebootstrap),
	symPathFullReimage:         string(contract.UpdatePathFullReimage),

	symProbePassed:      string(contract.ProbePassed),
	symProbeFailed:      string(contract.ProbeFailed),
	symProbeNotRequired: string(contract.ProbeNotRequired),
	symProbeNotExecuted: string(contract.ProbeNotExecuted),

	symImpactNoneObserved: string(contract.ImpactNoneObserved),
	symImpactDegraded:     string(contract.ImpactDegraded),
	symImpactUnavailable:  string(contract.ImpactUnavailable),
	symImpactUnknown:      string(contract.ImpactUnknown),

	symReasonClonedIdentity:         string(contract.NodeReasonClonedIdentity),
	symReasonCertIssuerMismatch:     string(contract.NodeReasonCertIssuerMismatch),
	symReasonCertUntrustedByIngress: string(contract.NodeReasonCertUntrustedByIngress),
	symReasonHealthFailed:           string(contract.NodeReasonHealthFailed),
	symReasonWorkloadUnavailable:    string(contract.NodeReasonWorkloadUnavailable),
	symReasonNoOwningRecord:         string(contract.NodeReasonNoOwningRecord),
	symReasonAgentDown:              string(contract.NodeReasonAgentDown),
	symReasonAgentOutdated:          string(contract.NodeReasonAgentOutdated),
	symReasonReplayInProgress:       string(contract.NodeReasonReplayInProgress),
	symReasonUpdateInProgress:       string(contract.NodeReasonUpdateInProgress),
	symReasonOperatorRecovery:       string(contract.NodeReasonOperatorRecovery),
	symReasonHealthDegraded:         string(contract.NodeReasonHealthDegraded),
	symReasonWorkloadDegraded:       string(contract.NodeReasonWorkloadDegraded),
	symReasonTerminalProbeFailed:    string(contract.NodeReasonTerminalProbeFailed),
	symReasonHeartbeatOverdue:       string(contract.NodeReasonHeartbeatOverdue),
	symReasonLinkDegraded:           string(contract.NodeReasonLinkDegraded),
	symReasonSyncDebt:               string(contract.NodeReasonSyncDebt),
	symReasonEvidenceIncomplete:     string(contract.NodeReasonEvidenceIncomplete),
}

// minCompactAt is the table size below which a tracker never compacts.
const minCompactAt = 4096

// newSymtab returns a table holding the fixed symbols.
func newSymtab() *intern.Table { return intern.New(fixedSyms[:]...) }
