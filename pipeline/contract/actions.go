package contract

import "time"

// TypeCommand is the event type of an operator action on topic
// ops.commands (CONTRACT section 9.2). Only the query service writes it;
// the ingest gateway routes it but grants it to no key by default, so it
// is not one of AllTypes.
const TypeCommand = "ops.command"

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
