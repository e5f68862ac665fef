package contract

import "time"

// TypeCommand is the event type of an operator action on topic
// ops.commands (CONTRACT section 9.2). Only the query service writes it;
// the ingest gateway routes it but grants it to no key by default, so it
// is not one of AllTypes.
const TypeCommand = "ops.command"

// ValidAction reports whether a is an action.
func ValidAction(a string) bool { return Valid(Actions, a) }

// Requests reports whether action a asks the platform's controllers to act
// (a request on reconcile.requests) rather than only annotating the
// finding.
func (a Action) Requests() bool {
	switch a {
	case ActionRetry, ActionCleanup, ActionQuarantineNode, ActionReleaseNode:
		return true
	}
	return false
}

// Command is the payload of an ops.command: one operator action on one
// finding. The query service writes it keyed by the finding's identity key
// (IdentityKey(Provider, ProviderID)), so that it lands on the partition
// of the finding's state; actor_id is the authenticated actor the query
// service derived, never a value a caller supplied.
type Command struct {
	CommandID      string    `json:"command_id"`
	EvidenceID     string    `json:"evidence_id"`
	Provider       string    `json:"provider"`
	ProviderID     string    `json:"provider_id"`
	Action         string    `json:"action"`
	Reason         string    `json:"reason"`
	Assignee       string    `json:"assignee"`
	Until          time.Time `json:"until"`
	IdempotencyKey string    `json:"idempotency_key"`
	ActorID        string    `json:"actor_id"`
}

func (p *Command) validate() *ValidationError {
	var c fieldCheck
	c.required("command_id", p.CommandID)
	c.required("evidence_id", p.EvidenceID)
	requiredOneOf(&c, "provider", p.Provider, Providers)
	c.required("provider_id", p.ProviderID)
	requiredOneOf(&c, "action", p.Action, Actions)
	c.required("actor_id", p.ActorID)
	c.time("until", p.Until, false)
	return c.err
}

// Request is a record of topic reconcile.requests: the joiner asks the
// platform's controllers to act on a finding (CONTRACT section 9.2). It is
// keyed by the finding's identity key; request_id is the id of the command
// that caused it, so a controller that sees a request twice can tell.
type Request struct {
	RequestID     string    `json:"request_id"`
	Action        string    `json:"action"`
	EvidenceID    string    `json:"evidence_id"`
	Identity      string    `json:"identity"`
	Runbook       string    `json:"runbook"`
	CorrelationID string    `json:"correlation_id"`
	ActorID       string    `json:"actor_id"`
	RequestedAt   time.Time `json:"requested_at"`
	Deadline      time.Time `json:"deadline"`
}

// FindingFacts is what decides whether an action is allowed on a finding:
// the API checks it against the read model before it accepts an action,
// and the joiner again, in stream order, against its own state.
type FindingFacts struct {
	Classification  Classification
	Status          FindingStatus
	Provider        string
	ActionState     ActionState
	SuppressedUntil time.Time
	// NodeQuarantined says an operator quarantined the finding's node
	// (quarantine_node applied, release_node not yet).
	NodeQuarantined bool
	// Owned says a live platform record owns the identity, or the
	// observation's owner_ref names a record (cleanup's guard); the read
	// model knows it as a record_id on the finding.
	Owned bool
	// IdentityPending says a request on any finding of the identity is
	// pending (a rollback or retry in flight: cleanup's guard).
	IdentityPending bool
}

// ActionAllowed returns why action a with the given until (suppress) and
// assignee (assign) may not be applied to a finding with facts f at time
// now, or "" when it may. now is the API's clock when it accepts, the
// partition's watermark when the joiner applies.
func ActionAllowed(a Action, f FindingFacts, assignee string, until, now time.Time) ActionReason {
	if !ValidAction(string(a)) {
		return ReasonUnknownAction
	}
	switch a {
	case ActionAssign:
		if assignee == "" {
			return ReasonMissingAssignee
		}
	case ActionSuppress:
		if until.IsZero() || !until.After(now) {
			return ReasonBadUntil
		}
	case ActionUnsuppress:
		if f.SuppressedUntil.IsZero() || !f.SuppressedUntil.After(now) {
			return ReasonNotSuppressed
		}
		return ""
	case ActionReleaseNode:
		if f.Provider != ProviderMAAS {
			return ReasonNotANode
		}
		if !f.NodeQuarantined {
			return ReasonNodeNotQuarantined
		}
		return ""
	}
	if f.Status != StatusOpen {
		return ReasonFindingResolved
	}
	switch a {
	case ActionRetry:
		if f.ActionState == ActionPending {
			return ReasonRequestPending
		}
	case ActionQuarantineNode:
		if f.Provider != ProviderMAAS {
			return ReasonNotANode
		}
		if f.NodeQuarantined {
			return ReasonNodeQuarantined
		}
	case ActionCleanup:
		// Seed 000's guard: an orphan past its grace (an open orphan
		// finding is one), no owning record, no rollback pending.
		switch {
		case f.Classification != ClassOrphan:
			return ReasonCleanupNotOrphan
		case f.Owned:
			return ReasonCleanupOwned
		case f.IdentityPending || f.ActionState == ActionPending:
			return ReasonCleanupRollback
		}
	}
	return ""
}
