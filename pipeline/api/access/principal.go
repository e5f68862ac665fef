// Package access decides who may read and act through the query API
// (CONTRACT 9.1) and writes the audit log.
//
// A request carries Authorization: Bearer <key>; the key's SHA-256 digest
// is looked up in the keys file (package keys, the ingest gateway's
// format), whose entry names the actor, its roles and their scopes. Guard
// holds the keyring in force and its policy revision, reloads it, and
// authenticates; Routes says which roles each endpoint needs; Auditor
// writes audit_log. The server's middleware (package api) puts the
// Principal in the request's context, where handlers find it with
// FromContext.
//
// The rules: no key, an unknown or a revoked one: 401. A key whose roles
// do not include one the endpoint needs: 403. admin passes every check;
// operator includes viewer. A finance key with tenant_ids sees only those
// tenants' billing rows (the reader drops the others in SQL: invisible,
// not an error). An operator key with authority_levels acts only on nodes
// of those levels (AllowsAuthority).
package access

import (
	"context"
	"slices"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// Principal is the authenticated caller of one request.
type Principal struct {
	ActorID string
	// KeyID is a short prefix of the key's digest, safe to log.
	KeyID string
	// Roles, TenantIDs and AuthorityLevels are the keys file entry's,
	// sorted; empty scopes are unlimited.
	Roles           []string
	TenantIDs       []string
	AuthorityLevels []string
	// PolicyRev is the revision of the access policy the request was
	// decided under.
	PolicyRev string
}

func principalOf(p *keys.Principal, rev string) Principal {
	return Principal{ActorID: p.ActorID, KeyID: p.KeyID, Roles: p.Roles, TenantIDs: p.TenantIDs,
		AuthorityLevels: p.AuthorityLevels, PolicyRev: rev}
}

// Has reports whether p holds role: admin holds every role, operator
// holds viewer too.
func (p Principal) Has(role string) bool {
	if slices.Contains(p.Roles, contract.RoleAdmin) || slices.Contains(p.Roles, role) {
		return true
	}
	return role == contract.RoleViewer && slices.Contains(p.Roles, contract.RoleOperator)
}

// HasAny reports whether p holds one of roles; no roles means any
// authenticated caller.
func (p Principal) HasAny(roles []string) bool {
	if len(roles) == 0 {
		return true
	}
	for _, r := range roles {
		if p.Has(r) {
			return true
		}
	}
	return false
}

// TenantScope returns the tenants whose billing rows p may see, and false
// when p sees every tenant's (admin, or finance without tenant_ids).
func (p Principal) TenantScope() ([]string, bool) {
	if slices.Contains(p.Roles, contract.RoleAdmin) || len(p.TenantIDs) == 0 {
		return nil, false
	}
	return p.TenantIDs, true
}

// AllowsAuthority reports whether p may take a node action on a node
// whose master of record is level (contract.AuthorityLevels): admin
// always; an operator when its key names no authority_levels or names
// this one. Anyone else never.
func AllowsAuthority(p Principal, level string) bool {
	if slices.Contains(p.Roles, contract.RoleAdmin) {
		return true
	}
	if !slices.Contains(p.Roles, contract.RoleOperator) {
		return false
	}
	return len(p.AuthorityLevels) == 0 || slices.Contains(p.AuthorityLevels, level)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal of the request ctx belongs to, and
// false outside an authenticated request.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
