package reader

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
)

// TopFindings reads the n findings of highest attention_score among the
// current open ones matching f, over all (perDomain false) or per owning
// domain; ties go by evidence_id. attention_top answers when it can
// (rankedFilter), else a ranked read of drift_evidence (ranked.go) or,
// per domain, one with FINAL.
//
// The open billing mismatches join the global queue as findings of
// classification billing_mismatch (drift.BillingAttentionScore); they
// belong to no owning domain, so not to a per-domain queue.
func (rd *Reader) TopFindings(ctx context.Context, f Filter, n int, perDomain bool) ([]apitypes.Finding, error) {
	f.Status = string(contract.StatusOpen)
	var (
		fs  []apitypes.Finding
		err error
	)
	if rankedFilter(f, n) {
		fs, err = rd.rankedFindings(ctx, f.OwningDomains, n, perDomain)
	} else {
		conds, args := f.where()
		// A suppressed finding scores 0: it leaves the queue (docs/actions.md).
		conds = append(conds, "attention_score > 0")
		if perDomain {
			fs, err = rd.domainTopFindings(ctx, conds, args, n)
		} else {
			fs, err = rankedPage(ctx, rd, "attention_findings", findingTable, FindSort(DriftSorts, "attention_score"), conds, args, nil, n)
		}
	}
	if err != nil || perDomain {
		return fs, err
	}
	billing, err := rd.billingTop(ctx, f, n)
	if err != nil || len(billing) == 0 {
		return fs, err
	}
	fs = append(fs, billing...)
	slices.SortStableFunc(fs, func(a, b apitypes.Finding) int {
		if c := cmp.Compare(b.AttentionScore, a.AttentionScore); c != 0 {
			return c
		}
		return strings.Compare(a.EvidenceID, b.EvidenceID)
	})
	return fs[:min(n, len(fs))], nil
}

// billingTop reads up to n open billing mismatches that f admits (see
// billingGroups) within ctx's tenant scope, oldest first, as findings of
// classification billing_mismatch.
func (rd *Reader) billingTop(ctx context.Context, f Filter, n int) ([]apitypes.Finding, error) {
	p, ok := admitsBilling(f)
	if !ok {
		return nil, nil
	}
	conds, args := listWhere([]listColumn{{"product_id", f.Products}})
	conds, args = lifecycleWhere(conds, args, string(contract.StatusOpen), f.FirstSeenBy)
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	return list(ctx, rd, "attention_billing", "SELECT mismatch_id, kind, usage_id, product_id, first_seen_at, last_seen_at"+
		" FROM billing_mismatch FINAL"+whereClause(conds)+fmt.Sprintf(" ORDER BY first_seen_at, mismatch_id LIMIT %d", n),
		args, nil, func(r driver.Rows) (apitypes.Finding, error) {
			var (
				id, kind, usage string
				x               = apitypes.Finding{Classification: string(contract.ClassBilling), Severity: string(p.Severity),
					Status: string(contract.StatusOpen), Posture: string(p.Posture), Runbook: p.Runbook,
					ResourceFamily: contract.FamilyBillingUsage, Provider: contract.ProviderBillingIngestion,
					AttentionScore: drift.BillingAttentionScore()}
			)
			err := r.Scan(&id, &kind, &usage, &x.ProductID, &x.FirstSeenAt, &x.LastSeenAt)
			x.EvidenceID = string(contract.ClassBilling) + ":" + id
			x.RecordType, x.RecordID, x.ProviderID = kind, usage, id
			x.FirstSeenAt, x.LastSeenAt = x.FirstSeenAt.UTC(), x.LastSeenAt.UTC()
			return x, err
		})
}

// TopNodes reads the n current nodes of highest attention_score matching
// f whose gate does not pass, over all (perDomain false) or per owning
// domain; ties go by node_id. attention_top_nodes answers when it can
// (rankedNodeFilter), else a ranked read of node_agent_status (ranked.go)
// or, per domain, one with FINAL. The nodes come
// in no set order: the attention queue ranks them with the findings, as
// it does TopFindings'.
func (rd *Reader) TopNodes(ctx context.Context, f NodeFilter, n int, perDomain bool) ([]apitypes.Node, error) {
	conds, args := f.where()
	// A node whose gate passes needs no attention whatever its score.
	conds = append(conds, "gate != '"+string(contract.GatePass)+"'")
	if rankedNodeFilter(f, n) {
		return rd.rankedTopNodes(ctx, f.OwningDomains, conds, args, n, perDomain)
	}
	if perDomain {
		return rd.domainTopNodes(ctx, conds, args, n)
	}
	return rankedPage(ctx, rd, "attention_nodes", nodeTable, FindSort(NodeSorts, "attention_score"), conds, args, nil, n)
}

// domainTopFindings reads the n findings of highest attention_score of
// each owning domain under conds, collapsing drift_evidence with FINAL.
func (rd *Reader) domainTopFindings(ctx context.Context, conds []string, args []any, n int) ([]apitypes.Finding, error) {
	return list(ctx, rd, "attention_findings", "SELECT "+findingColumns+" FROM drift_evidence FINAL"+
		whereClause(conds)+domainTopOrder("evidence_id", n), args, nil, findingRow)
}

// domainTopNodes reads the n current nodes of highest attention_score of
// each owning domain under conds, collapsing node_agent_status with FINAL.
func (rd *Reader) domainTopNodes(ctx context.Context, conds []string, args []any, n int) ([]apitypes.Node, error) {
	return list(ctx, rd, "attention_nodes", "SELECT "+nodeColumns+" FROM node_agent_status FINAL"+
		whereClause(conds)+domainTopOrder("node_id", n), args, nil, nodeRow)
}

// domainTopOrder keeps the n rows of highest attention_score of each
// owning domain, ties by idCol (LIMIT BY, which 18.16 has).
func domainTopOrder(idCol string, n int) string {
	return fmt.Sprintf(" ORDER BY owning_domain, %s DESC, %s LIMIT %d BY owning_domain",
		FindSort(DriftSorts, "attention_score").keyCol(), idCol, n)
}
