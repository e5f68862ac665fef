package reader

import (
	"strings"
	"testing"
	"time"
)

// FuzzWhere renders filters holding arbitrary values: the SQL must have
// one placeholder per argument and never hold a value.
func FuzzWhere(f *testing.F) {
	f.Add("gpu", "compute,edge", "open", "a'b", int64(1e9))
	f.Add("", "x?y", "all", `\`, int64(0))
	f.Add("p,q,r", "", "resolved", "?", int64(-1))
	f.Fuzz(func(t *testing.T, products, domains, status, other string, seen int64) {
		list := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		var by time.Time
		if seen != 0 {
			by = time.Unix(seen, 0)
		}
		check := func(what string, conds []string, args []any) {
			t.Helper()
			if n := strings.Count(strings.Join(conds, " "), "?"); n != len(args) {
				t.Fatalf("%s: %d placeholders, %d args: %v", what, n, len(args), conds)
			}
			for _, c := range conds {
				if strings.ContainsAny(c, "'\\") {
					t.Fatalf("%s: a value reached the SQL text: %s", what, c)
				}
			}
		}
		df := Filter{Products: list(products), OwningDomains: list(domains), Providers: list(other), Status: status, FirstSeenBy: by}
		c, a := df.where()
		check("drift", c, a)
		nf := NodeFilter{NodeIDs: list(products), OwningDomains: list(domains), NodeAgentReasons: list(other)}
		c, a = nf.where()
		check("nodes", c, a)
		mf := MismatchFilter{Tenants: list(products), Currencies: list(domains), UsageIDs: list(other), Status: status, FirstSeenBy: by}
		if !by.IsZero() {
			mf.Days = []time.Time{by}
		}
		c, a = mf.where()
		check("billing", c, a)
		for _, s := range []Sort{DriftSorts[1], DriftSorts[2], NodeSorts[0]} {
			cond, args := s.after(Keyset{Sort: s.Name, Key: float64(seen), ID: other}, "evidence_id")
			check("after", []string{cond}, args)
		}
	})
}
