package access

import (
	"slices"
	"sort"

	"github.com/driftline/driftline/pipeline/contract"
)

// Rule is what an endpoint asks of its caller.
type Rule struct {
	// Public endpoints answer without a key (the health check, the UI's
	// static files, unknown paths): they hold no data.
	Public bool
	// Roles admits a caller holding any of them (see Principal.Has);
	// empty with Public false admits any authenticated caller.
	Roles []string
	// Audited endpoints write an audit entry for every allowed request
	// before answering (actions, evidence bundles, the audit log); an
	// export of a listing is audited by its handler.
	Audited bool
}

var (
	viewer   = []string{contract.RoleViewer}
	finance  = []string{contract.RoleFinance}
	operator = []string{contract.RoleOperator}
	auditor  = []string{contract.RoleAuditor}
)

// Routes maps every endpoint of the query API, by the name its metrics
// and audit entries carry, to its rule. An endpoint missing here is
// refused to everyone but admin (fail closed).
var Routes = map[string]Rule{
	"healthz":   {Public: true},
	"not_found": {Public: true},
	"session":   {},

	"status":  {Roles: []string{contract.RoleViewer, contract.RoleFinance}},
	"metrics": {Roles: viewer},

	"drift":        {Roles: viewer},
	"drift_detail": {Roles: viewer},
	"heatmap":      {Roles: viewer},
	"attention":    {Roles: viewer},
	"connectivity": {Roles: viewer},
	"nodes":        {Roles: viewer},
	"node_detail":  {Roles: viewer},
	// The fleet core (CONTRACT section 8).
	"node_timeline": {Roles: viewer},
	"rollouts":      {Roles: viewer},
	"relays":        {Roles: viewer},
	"syncdebt":      {Roles: viewer},
	"bundle":        {Roles: viewer, Audited: true},

	"billing_mismatches":   {Roles: finance},
	"billing_rated":        {Roles: finance},
	"billing_automation":   {Roles: finance},
	"billing_conservation": {Roles: finance},

	"audit": {Roles: auditor, Audited: true},

	// Operator actions (CONTRACT 9.2).
	"finding_actions": {Roles: operator, Audited: true},
	"actions_batch":   {Roles: operator, Audited: true},
}

// RuleOf returns the rule of endpoint; an unknown endpoint is admin's
// alone.
func RuleOf(endpoint string) Rule {
	if r, ok := Routes[endpoint]; ok {
		return r
	}
	return Rule{Roles: []string{contract.RoleAdmin}}
}

// Allowed reports whether p may call endpoint.
func Allowed(p Principal, endpoint string) bool {
	r := RuleOf(endpoint)
	return r.Public || p.HasAny(r.Roles)
}

// Endpoints lists the non-public endpoints p may call, sorted.
func Endpoints(p Principal) []string {
	var out []string
	for name, r := range Routes {
		if !r.Public && p.HasAny(r.Roles) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return slices.Clip(out)
}
