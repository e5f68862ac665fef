package reader

import (
	"context"
	"fmt"
	"slices"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
)

// TopFindings reads the n findings of highest attention_score among the
// current open ones matching f, over all (perDomain false) or per owning
// domain; ties go by evidence_id. attention_top answers when it can
// (rankedFilter), else a scan of drift_evidence.
func (rd *Reader) TopFindings(ctx context.Context, f Filter, n int, perDomain bool) ([]apitypes.Finding, error) {
	f.Status = string(contract.StatusOpen)
	if rankedFilter(f, n) {
		return rd.rankedFindings(ctx, f.OwningDomains, n, perDomain)
	}
	conds, args := f.where()
	return rd.topFindings(ctx, conds, args, n, perDomain)
}

// TopNodes reads the n current nodes of highest attention_score matching
// f whose gate does not pass, over all (perDomain false) or per owning
// domain; ties go by node_id.
func (rd *Reader) TopNodes(ctx context.Context, f NodeFilter, n int, perDomain bool) ([]apitypes.Node, error) {
	conds, args := f.where()
	if perDomain {
		return rd.topNodes(ctx, conds, args, n, true)
	}
	return rd.rankedNodes(ctx, conds, args, n)
}

// topFindings reads the n findings of highest attention_score under
// conds, collapsing drift_evidence with FINAL.
func (rd *Reader) topFindings(ctx context.Context, conds []string, args []any, n int, perDomain bool) ([]apitypes.Finding, error) {
	return list(ctx, rd, "attention_findings", "SELECT "+findingColumns+" FROM drift_evidence FINAL"+
		whereClause(conds)+topOrder("evidence_id", n, perDomain), args, nil, findingRow)
}

// topNodes reads the n current nodes of highest attention_score under
// conds whose gate does not pass, collapsing node_agent_status with FINAL.
func (rd *Reader) topNodes(ctx context.Context, conds []string, args []any, n int, perDomain bool) ([]apitypes.Node, error) {
	// A node whose gate passes needs no attention whatever its score.
	conds = append(slices.Clone(conds), "gate != '"+string(contract.GatePass)+"'")
	return list(ctx, rd, "attention_nodes", "SELECT "+nodeColumns+" FROM node_agent_status FINAL"+
		whereClause(conds)+topOrder("node_id", n, perDomain), args, nil, nodeRow)
}

// topOrder keeps the n rows of highest attention_score, ties by idCol,
// over all (perDomain false) or per owning domain (LIMIT BY, which 18.16
// has).
func topOrder(idCol string, n int, perDomain bool) string {
	if perDomain {
		return fmt.Sprintf(" ORDER BY owning_domain, attention_score DESC, %s LIMIT %d BY owning_domain", idCol, n)
	}
	return fmt.Sprintf(" ORDER BY attention_score DESC, %s LIMIT %d", idCol, n)
}
