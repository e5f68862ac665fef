package contract

// Policy is what CONTRACT section 4 fixes for one classification.
type Policy struct {
	Severity Severity
	Posture  Posture // the default posture; see StaleReviewAfter
	Runbook  string  // stable runbook reference, runbooks/<classification>
}

// policies is the table of CONTRACT section 4, in Classifications order.
var policies = [...]struct {
	class    Classification
	severity Severity
	posture  Posture
}{
	{ClassOrphan, SeverityWarning, PostureQuarantine},
	{ClassMissing, SeverityCritical, PostureBlockAdmission},
	{ClassStale, SeverityWarning, PostureRetry},
	{ClassIdentity, SeverityCritical, PostureQuarantine},
	{ClassQuota, SeverityCritical, PostureBlockAdmission},
	{ClassRoute, SeverityCritical, PostureQuarantine},
	{ClassAuthority, SeverityCritical, PostureBlockAdmission},
	{ClassSupplyChain, SeverityCritical, PostureQuarantine},
	{ClassBilling, SeverityCritical, PostureOperatorReview},
}

// PolicyOf returns the policy of classification c, and false if c is not a
// classification.
func PolicyOf(c Classification) (Policy, bool) {
	for _, p := range policies {
		if p.class == c {
			return Policy{Severity: p.severity, Posture: p.posture, Runbook: "runbooks/" + string(c)}, true
		}
	}
	return Policy{}, false
}

// StaleReviewAfter is the number of consecutive disagreeing observations
// after which a stale_lifecycle_state finding moves from retry to
// operator_review.
const StaleReviewAfter = 3
