package contract

// Roles of the query API (CONTRACT 9.1), granted per key in the keys file.
// admin passes every check; operator includes viewer.
const (
	RoleViewer   = "viewer"   // fleet reads: drift, nodes, heat map, attention, status, metrics
	RoleFinance  = "finance"  // billing reads, optionally scoped to tenant_ids
	RoleOperator = "operator" // viewer plus actions, optionally scoped to authority_levels
	RoleAuditor  = "auditor"  // the audit log
	RoleAdmin    = "admin"    // everything
)

// Roles lists every role, in the order of the contract.
var Roles = []string{RoleViewer, RoleFinance, RoleOperator, RoleAuditor, RoleAdmin}

// Authority levels (a node record's authority.master_of_record, CONTRACT
// 8.1): the scope an operator key may act on with node actions.
const (
	AuthorityGlobal = "GLOBAL"
	AuthorityRegion = "REGION"
	AuthorityLocal  = "LOCAL"
)

// AuthorityLevels lists every authority level.
var AuthorityLevels = []string{AuthorityGlobal, AuthorityRegion, AuthorityLocal}
