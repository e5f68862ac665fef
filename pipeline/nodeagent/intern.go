package nodeagent

import "strings"

// sym is an interned string: versions, fingerprints, domains and the
// enumerations of a heartbeat repeat across nodes, so a node keeps 4-byte
// symbols instead of 16-byte string headers with their own copies.
type sym uint32

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

// symtab interns strings. It only grows; the tracker bounds it by
// rebuilding it from the live nodes (compact) once it has doubled, so a
// producer sending a new fingerprint with every heartbeat costs at most
// twice the distinct values nodes currently hold.
type symtab struct {
	ids  map[string]sym
	strs []string
}

func newSymtab() *symtab {
	t := &symtab{ids: make(map[string]sym, 2*numFixedSyms), strs: make([]string, 0, 2*numFixedSyms)}
	for _, s := range fixedSyms {
		t.intern(s)
	}
	return t
}

// intern returns the symbol of s, adding a copy of s when it is new (the
// caller's string may alias a decode buffer).
func (t *symtab) intern(s string) sym {
	if id, ok := t.ids[s]; ok {
		return id
	}
	s = strings.Clone(s)
	id := sym(len(t.strs))
	t.strs = append(t.strs, s)
	t.ids[s] = id
	return id
}

func (t *symtab) str(id sym) string { return t.strs[id] }

func (t *symtab) len() int { return len(t.strs) }
