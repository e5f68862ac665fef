package apitypes

import "time"

// Session is the answer of GET /v1/session: who the key is and what it
// may do, for the UI to show only what the role allows.
type Session struct {
	ActorID         string   `json:"actor_id"`
	Roles           []string `json:"roles"`
	TenantIDs       []string `json:"tenant_ids,omitempty"`       // finance scope; empty: every tenant
	AuthorityLevels []string `json:"authority_levels,omitempty"` // operator scope; empty: every level
	// Endpoints the key may call, by name (status, drift, billing_rated,
	// audit, ...).
	Endpoints   []string `json:"endpoints"`
	PolicyRev   string   `json:"policy_rev"`
	Environment string   `json:"environment"`
}

// AuditEntry is one row of audit_log.
type AuditEntry struct {
	At        time.Time `json:"at"`
	ActorID   string    `json:"actor_id"`
	Roles     []string  `json:"roles"`
	TenantIDs []string  `json:"tenant_ids,omitempty"`
	RequestID string    `json:"request_id"`
	Method    string    `json:"method"`
	Target    string    `json:"target"`
	Endpoint  string    `json:"endpoint"`
	Result    string    `json:"result"`
	Status    int       `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	Remote    string    `json:"remote,omitempty"`
	KeyID     string    `json:"key_id,omitempty"`
	PolicyRev string    `json:"policy_rev"`
}

// AuditPage is the answer of GET /v1/audit, newest first.
type AuditPage struct {
	Entries   []AuditEntry `json:"entries"`
	Count     int          `json:"count"`
	Truncated bool         `json:"truncated"` // more entries match; narrow the time range
}
