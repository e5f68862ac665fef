package reader

import (
	"context"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// The heat map, the status counts and the attention queue read the small
// tables the joiner keeps (finding_counts, attention_top; migration 004)
// instead of collapsing drift_evidence with FINAL, which on ClickHouse
// 18.16 reads the whole table. Drift pages in evidence_id order read
// drift_evidence only between the cursor and a sampled evidence id
// (drift_evidence_marks). docs/drift-model.md describes the tables.

// countedFilter reports whether finding_counts answers f: every filter
// but the first-seen bound and the tags is one of its columns.
func countedFilter(f Filter) bool { return f.FirstSeenBy.IsZero() && len(f.Tags) == 0 }

// Heatmap counts the current findings matching f by owning_domain,
// classification, severity, status and posture, from finding_counts when
// it answers f; the billing mismatches count as findings of
// classification billing_mismatch (billingGroups).
func (rd *Reader) Heatmap(ctx context.Context, f Filter) ([]FindingGroup, error) {
	if countedFilter(f) {
		groups, err := rd.countGroups(ctx, "heatmap", f)
		return rd.withBilling(ctx, "heatmap", f, groups, err)
	}
	groups, err := rd.groups(ctx, "heatmap", f)
	return rd.withBilling(ctx, "heatmap", f, groups, err)
}

// StatusCounts counts every current finding as Heatmap does.
func (rd *Reader) StatusCounts(ctx context.Context) ([]FindingGroup, error) {
	f := Filter{Status: apitypes.StatusAll}
	groups, err := rd.countGroups(ctx, "status_counts", f)
	return rd.withBilling(ctx, "status_counts", f, groups, err)
}

// countGroups sums finding_counts over the joiner partitions, by the
// columns the summaries fold.
func (rd *Reader) countGroups(ctx context.Context, name string, f Filter) ([]FindingGroup, error) {
	conds, args := f.where()
	sql := `SELECT owning_domain, classification, severity, status, posture, sum(findings) AS n
	FROM finding_counts FINAL` + whereClause(conds) + `
	GROUP BY owning_domain, classification, severity, status, posture HAVING n > 0`
	return rd.scanGroups(ctx, name, sql, args)
}

// rankedFilter reports whether attention_top answers the findings of an
// attention queue of n over f: no filter but owning_domain, and n within
// the slots kept.
func rankedFilter(f Filter, n int) bool {
	g := f
	g.OwningDomains, g.Status = nil, ""
	return n <= sink.AttentionSlots && g.FirstSeenBy.IsZero() && len(g.Tags) == 0 && len(g.Products) == 0 && len(g.ResourceFamilies) == 0 &&
		len(g.Classifications) == 0 && len(g.Severities) == 0 && len(g.DomainIDs) == 0 && len(g.Providers) == 0
}

// rankedFindings reads the top n open findings from attention_top, over
// all (perDomain false) or per owning domain, restricted to domains if
// given, and then their current rows. The rows decide: a finding whose
// current row is no longer open (written after the slots) is left out.
func (rd *Reader) rankedFindings(ctx context.Context, domains []string, n int, perDomain bool) ([]apitypes.Finding, error) {
	ids, err := rd.rankedIDs(ctx, "attention_top", "evidence_id", domains, n, perDomain)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	// A suppressed finding scores 0: it leaves the queue (docs/actions.md).
	return rd.currentFindings(ctx, "attention_findings", []string{"status = ?", "attention_score > 0"}, []any{string(contract.StatusOpen)}, ids)
}

// rankedNodeFilter reports whether attention_top_nodes answers the nodes
// of an attention queue of n over f: no condition but owning_domain, and
// n within the slots kept.
func rankedNodeFilter(f NodeFilter, n int) bool {
	f.OwningDomains = nil
	conds, _ := f.where()
	return len(conds) == 0 && n <= sink.AttentionSlots
}

// rankedTopNodes reads the top n nodes from attention_top_nodes, over all
// (perDomain false) or per owning domain, restricted to domains if given,
// and then their current rows that meet conds (the domains, a gate other
// than pass). The rows decide, as for findings: a node whose current row
// passes (written after the slots) is left out.
func (rd *Reader) rankedTopNodes(ctx context.Context, domains, conds []string, args []any, n int, perDomain bool) ([]apitypes.Node, error) {
	ids, err := rd.rankedIDs(ctx, "attention_top_nodes", "node_id", domains, n, perDomain)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return rd.currentNodes(ctx, "attention_nodes", conds, args, ids)
}

// rankedIDs reads the slots of an attention top (table, its id column
// idCol) and returns the ids of the top n, over all (perDomain false) or
// per owning domain, restricted to domains if given.
func (rd *Reader) rankedIDs(ctx context.Context, table, idCol string, domains []string, n int, perDomain bool) ([]string, error) {
	conds, args := []string{idCol + " != ''"}, []any{}
	if perDomain || len(domains) > 0 {
		conds = append(conds, "per_domain = 1")
		if len(domains) > 0 {
			conds = append(conds, inList("owning_domain", len(domains)))
			for _, d := range domains {
				args = append(args, d)
			}
		}
	} else {
		conds = append(conds, "per_domain = 0")
	}
	type slot struct {
		domain, id string
		score      float64
	}
	var slots []slot
	err := rd.each(ctx, table, "SELECT owning_domain, "+idCol+", attention_score FROM "+table+" FINAL"+
		whereClause(conds), args, func(r driver.Rows) error {
		var sl slot
		err := r.Scan(&sl.domain, &sl.id, &sl.score)
		slots = append(slots, sl)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(slots, func(a, b slot) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	// The top n of each domain (or overall): the slots of one item can
	// appear under its domain and overall, never twice in one selection.
	var ids []string
	taken, seen := map[string]int{}, map[string]bool{}
	for _, sl := range slots {
		key := ""
		if perDomain {
			key = sl.domain
		}
		if taken[key] >= n || seen[sl.id] {
			continue
		}
		taken[key]++
		seen[sl.id] = true
		ids = append(ids, sl.id)
	}
	return ids, nil
}

// billingGroups counts the billing mismatches that f admits as findings of
// classification billing_mismatch (CONTRACT section 4), with its policy's
// severity and posture. A mismatch belongs to no owning domain (its group
// has domain ""), so a filter on domains, domain ids, resource families
// other than billing_usage, or providers other than billing_ingestion
// admits none. Only the mismatches of ctx's tenant scope count, as in the
// billing reads: a scoped key is not told how many other tenants have.
func (rd *Reader) billingGroups(ctx context.Context, name string, f Filter) ([]FindingGroup, error) {
	p, ok := admitsBilling(f)
	if !ok {
		return nil, nil
	}
	conds, args := listWhere([]listColumn{{"product_id", f.Products}})
	conds, args = lifecycleWhere(conds, args, f.Status, f.FirstSeenBy)
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	counts, err := list(ctx, rd, name+"_billing", "SELECT status, count() FROM billing_mismatch FINAL"+whereClause(conds)+
		" GROUP BY status", args, nil, func(r driver.Rows) (FindingGroup, error) {
		g := FindingGroup{Classification: string(contract.ClassBilling), Severity: string(p.Severity), Posture: string(p.Posture)}
		err := r.Scan(&g.Status, &g.Count)
		return g, err
	})
	return counts, err
}

// admitsBilling reports whether f's filters other than status, product
// and first-seen admit billing mismatches, and returns the policy of
// billing_mismatch.
func admitsBilling(f Filter) (contract.Policy, bool) {
	p, _ := contract.PolicyOf(contract.ClassBilling)
	admits := func(vs []string, v string) bool { return len(vs) == 0 || slices.Contains(vs, v) }
	return p, admits(f.Classifications, string(contract.ClassBilling)) && admits(f.Severities, string(p.Severity)) &&
		len(f.OwningDomains) == 0 && len(f.DomainIDs) == 0 && admits(f.ResourceFamilies, contract.FamilyBillingUsage) &&
		admits(f.Providers, contract.ProviderBillingIngestion) && len(f.Tags) == 0
}

// withBilling appends the billing groups of f to groups.
func (rd *Reader) withBilling(ctx context.Context, name string, f Filter, groups []FindingGroup, err error) ([]FindingGroup, error) {
	if err != nil {
		return nil, err
	}
	billing, err := rd.billingGroups(ctx, name, f)
	return append(groups, billing...), err
}
