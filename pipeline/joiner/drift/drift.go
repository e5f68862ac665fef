// Package drift is the joiner's record of a drift finding and the
// attention score that orders the operator queue. The vocabulary (the
// classifications with their severity, posture and runbook, statuses and
// transitions) is the contract's; Class is the joiner's compact index of
// the eight classifications it derives.
package drift

import (
	"fmt"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Class is a drift classification the joiner derives, as a small index:
// per-identity state keeps one slot per Class.
type Class uint8

// Classifications, in a fixed order (the order is an array index; append
// only).
const (
	Orphan Class = iota
	Missing
	Stale
	IdentityMismatch
	Quota
	Route
	// The fleet core's findings on a node's identity (CONTRACT 8.3).
	AuthorityConflict
	SupplyChain
	NumClasses
)

// classNames names each Class: the contract's classifications, in the
// same order (the joiner raises every one but billing_mismatch, which
// comes last).
var classNames = contract.Classifications[:NumClasses]

// String returns the contract classification of c.
func (c Class) String() string {
	if c < NumClasses {
		return string(classNames[c])
	}
	return fmt.Sprintf("class(%d)", c)
}

// ParseClass returns the Class named s.
func ParseClass(s string) (Class, bool) {
	for i, n := range classNames {
		if string(n) == s {
			return Class(i), true
		}
	}
	return 0, false
}

// policies holds the contract policy of each Class, looked up once.
var policies = func() (p [NumClasses]contract.Policy) {
	for c := range NumClasses {
		var ok bool
		if p[c], ok = contract.PolicyOf(classNames[c]); !ok {
			panic("BUG: drift class " + string(classNames[c]) + " has no contract policy")
		}
	}
	return p
}()

// PolicyOf returns the contract policy of c.
func PolicyOf(c Class) contract.Policy { return policies[c] }

// weights rank the classifications within a severity in the attention
// score.
var weights = [NumClasses]float64{Orphan: 50, Missing: 200, Stale: 30, IdentityMismatch: 500, Quota: 200, Route: 300,
	AuthorityConflict: 450, SupplyChain: 450}

// EvidenceID is the stable id of the finding of class c on an identity
// (provider/provider_id): readable, and collision-free by construction.
func EvidenceID(c Class, identityKey string) string { return c.String() + ":" + identityKey }

// Attention score. The score orders the operator attention queue:
//
//	score = severity base + classification weight + 5 x min(retry_count, 10)
//
// with severity base critical 1000, warning 100, info 10, and weights
// identity_mismatch 500, authority_conflict 450, supply_chain_violation
// 450, route 300, missing 200, quota 200, orphan 50, stale 30. A warning
// scores at most 100 + 50 + 50 = 200, so every critical finding (>= 1000),
// and above all every critical identity or security finding (>= 1450),
// outranks every warning. Resolved findings
// score 0.
func AttentionScore(c Class, status contract.FindingStatus, retryCount uint32) float64 {
	if status != contract.StatusOpen {
		return 0
	}
	base := 10.0
	switch policies[c].Severity {
	case contract.SeverityCritical:
		base = 1000
	case contract.SeverityWarning:
		base = 100
	}
	return base + weights[c] + 5*float64(min(retryCount, 10))
}

// BillingWeight ranks billing_mismatch, which the billing reconciler
// raises (one finding per mismatch row), among the critical findings in
// the attention score: above missing and quota, below route and identity.
const BillingWeight = 250

// BillingAttentionScore is the attention score of an open billing
// mismatch: the critical base plus BillingWeight (a mismatch is not
// retried, so no retry term).
func BillingAttentionScore() float64 { return 1000 + BillingWeight }

// Finding is the current state of one drift finding, as written to
// reconcile.drift_evidence.
type Finding struct {
	EvidenceID      string
	CorrelationID   string
	ResourceFamily  string
	ProductID       string
	OwningDomain    string
	OwningPackage   string
	DomainID        string
	RecordType      string
	RecordID        string
	ExpectedState   string
	ExpectedVersion string
	Provider        string
	ProviderID      string
	ObservedState   string
	ObservedVersion string
	ObservedAt      time.Time
	Class           Class
	Severity        contract.Severity
	Status          contract.FindingStatus
	FirstSeenAt     time.Time
	LastSeenAt      time.Time
	ResolvedAt      time.Time
	RetryCount      uint32
	Posture         contract.Posture
	NextAttemptAt   time.Time
	Runbook         string
	AttentionScore  float64
	// The operator columns (CONTRACT section 9.2), kept by the joiner's
	// actions beside the classifier's state: who acknowledged it, who it
	// is assigned to, until when it is suppressed, where its latest
	// request stands (contract.ActionState) and the id of the latest
	// action applied.
	AcknowledgedBy  string
	Assignee        string
	SuppressedUntil time.Time
	ActionState     contract.ActionState
	LastActionID    string
	// Tags are the tags of the finding's platform record (a node's, for
	// the node findings), shared: not to be modified.
	Tags []string
	// Version grows with every transition of this finding; the highest
	// version is the current row.
	Version uint64
	// Transition names what changed: opened, updated, resolved, reopened.
	Transition contract.Transition
}
