package reader

import (
	"context"
	"slices"
)

// A tenant scope limits every billing read of a request to some tenants'
// rows: billing_mismatch, rated_usage and billing_window rows of other
// tenants are left out in SQL, so they count in no list, total, export,
// conservation sum or automation flag. Rows attributed to no tenant
// (tenant_id '', an unbalanced window no usage names) belong to no other
// tenant and stay visible: they stop every tenant's automation alike.
// The scope travels in the request's context so that no billing query
// can be written without it.

type scopeKey struct{}

// WithTenantScope returns ctx whose billing reads see only tenants' rows
// (and unattributed ones). An empty tenants is a scope of no tenant: only
// unattributed rows. Scopes nest by intersection.
func WithTenantScope(ctx context.Context, tenants []string) context.Context {
	next := slices.Clone(tenants)
	if prev, ok := TenantScope(ctx); ok {
		next = slices.DeleteFunc(next, func(t string) bool { return !slices.Contains(prev, t) })
	}
	if next == nil {
		next = []string{}
	}
	return context.WithValue(ctx, scopeKey{}, next)
}

// TenantScope returns the tenants the billing reads of ctx are limited
// to, and false when they are not limited.
func TenantScope(ctx context.Context) ([]string, bool) {
	s, ok := ctx.Value(scopeKey{}).([]string)
	return s, ok
}

// scopeWhere appends ctx's tenant scope over column col to conds.
func scopeWhere(ctx context.Context, col string, conds []string, args []any) ([]string, []any) {
	s, ok := TenantScope(ctx)
	if !ok {
		return conds, args
	}
	if len(s) == 0 {
		return append(conds, col+" = ''"), args
	}
	conds = append(slices.Clone(conds), "("+inList(col, len(s))+" OR "+col+" = '')")
	args = slices.Clone(args)
	for _, t := range s {
		args = append(args, t)
	}
	return conds, args
}
