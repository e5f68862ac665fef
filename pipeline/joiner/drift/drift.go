// Package drift defines the drift findings of CONTRACT section 4: the
// classifications with their severity, posture and runbook, the finding
// record the joiner maintains, and the attention score that orders the
// operator queue.
package drift

import (
	"fmt"
	"time"
)

// Class is a drift classification.
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
	NumClasses
)

var classNames = [NumClasses]string{
	Orphan:           "orphan_provider_resource",
	Missing:          "missing_provider_resource",
	Stale:            "stale_lifecycle_state",
	IdentityMismatch: "identity_mismatch",
	Quota:            "quota_or_capacity_mismatch",
	Route:            "route_or_dns_mismatch",
}

func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// ParseClass returns the Class named s.
func ParseClass(s string) (Class, bool) {
	for i, n := range classNames {
		if n == s {
			return Class(i), true
		}
	}
	return 0, false
}

// Severity levels.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// Postures (seed 000, evidence record action).
const (
	PostureNone           = "none"
	PostureRetry          = "retry"
	PostureQuarantine     = "quarantine"
	PostureBlockAdmission = "block_admission"
	PostureOperatorReview = "operator_review"
)

// Finding statuses.
const (
	StatusOpen     = "open"
	StatusResolved = "resolved"
)

// Policy is what CONTRACT section 4 fixes for one classification.
type Policy struct {
	Severity string
	Posture  string // default posture
	Runbook  string // stable runbook reference
	weight   float64
}

var policies = [NumClasses]Policy{
	Orphan:           {SeverityWarning, PostureQuarantine, "runbooks/orphan_provider_resource", 50},
	Missing:          {SeverityCritical, PostureBlockAdmission, "runbooks/missing_provider_resource", 200},
	Stale:            {SeverityWarning, PostureRetry, "runbooks/stale_lifecycle_state", 30},
	IdentityMismatch: {SeverityCritical, PostureQuarantine, "runbooks/identity_mismatch", 500},
	Quota:            {SeverityCritical, PostureBlockAdmission, "runbooks/quota_or_capacity_mismatch", 200},
	Route:            {SeverityCritical, PostureQuarantine, "runbooks/route_or_dns_mismatch", 300},
}

// PolicyOf returns the policy of c.
func PolicyOf(c Class) Policy { return policies[c] }

// StaleReviewAfter is the number of consecutive disagreeing observations
// after which a stale_lifecycle_state finding moves from retry to
// operator_review.
const StaleReviewAfter = 3

// EvidenceID is the stable id of the finding of class c on an identity
// (provider/provider_id): readable, and collision-free by construction.
func EvidenceID(c Class, identityKey string) string { return c.String() + ":" + identityKey }

// Attention score. The score orders the operator attention queue:
//
//	score = severity base + classification weight + 5 x min(retry_count, 10)
//
// with severity base critical 1000, warning 100, info 10, and weights
// identity_mismatch 500, route 300, missing 200, quota 200, orphan 50,
// stale 30. A warning scores at most 100 + 50 + 50 = 200, so every
// critical finding (>= 1000), and above all every critical identity or
// security finding (>= 1500), outranks every warning. Resolved findings
// score 0.
func AttentionScore(c Class, status string, retryCount uint32) float64 {
	if status != StatusOpen {
		return 0
	}
	p := policies[c]
	base := 10.0
	switch p.Severity {
	case SeverityCritical:
		base = 1000
	case SeverityWarning:
		base = 100
	}
	return base + p.weight + 5*float64(min(retryCount, 10))
}

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
	Severity        string
	Status          string
	FirstSeenAt     time.Time
	LastSeenAt      time.Time
	ResolvedAt      time.Time
	RetryCount      uint32
	Posture         string
	NextAttemptAt   time.Time
	Runbook         string
	AttentionScore  float64
	// Version grows with every transition of this finding; the highest
	// version is the current row.
	Version uint64
	// Transition names what changed: opened, updated, resolved, reopened.
	Transition string
}

// Transitions.
const (
	TransitionOpened   = "opened"
	TransitionUpdated  = "updated"
	TransitionResolved = "resolved"
	TransitionReopened = "reopened"
)
