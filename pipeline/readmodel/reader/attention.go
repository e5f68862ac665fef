package reader

import (
	"context"
	"fmt"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

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
// conds, over all (perDomain false) or per owning domain (LIMIT BY, which
// 18.16 has), collapsing drift_evidence with FINAL.
func (rd *Reader) topFindings(ctx context.Context, conds []string, args []any, n int, perDomain bool) ([]apitypes.Finding, error) {
	order, limit := " ORDER BY attention_score DESC, evidence_id", fmt.Sprintf(" LIMIT %d", n)
	if perDomain {
		order = " ORDER BY owning_domain, attention_score DESC, evidence_id"
		limit = fmt.Sprintf(" LIMIT %d BY owning_domain", n)
	}
	rows, err := rd.query(ctx, "attention_findings", "SELECT "+findingColumns+" FROM drift_evidence FINAL"+
		whereClause(conds)+order+limit, args...)
	if err != nil {
		return nil, err
	}
	var out []apitypes.Finding
	err = rd.scanAll("attention_findings", rows, func(r driver.Rows) error {
		f, err := scanFinding(r)
		out = append(out, f)
		return err
	})
	return out, err
}

// topNodes reads the n current nodes of highest attention_score under
// conds whose gate does not pass, over all (perDomain false) or per owning
// domain, collapsing node_agent_status with FINAL.
func (rd *Reader) topNodes(ctx context.Context, conds []string, args []any, n int, perDomain bool) ([]apitypes.Node, error) {
	order, limit := " ORDER BY attention_score DESC, node_id", fmt.Sprintf(" LIMIT %d", n)
	if perDomain {
		order = " ORDER BY owning_domain, attention_score DESC, node_id"
		limit = fmt.Sprintf(" LIMIT %d BY owning_domain", n)
	}
	// A node whose gate passes needs no attention whatever its score.
	conds = append(slices.Clone(conds), "gate != '"+string(contract.GatePass)+"'")
	rows, err := rd.query(ctx, "attention_nodes", "SELECT "+nodeColumns+" FROM node_agent_status FINAL"+
		whereClause(conds)+order+limit, args...)
	if err != nil {
		return nil, err
	}
	var out []apitypes.Node
	err = rd.scanAll("attention_nodes", rows, func(r driver.Rows) error {
		nd, err := scanNode(r)
		out = append(out, nd)
		return err
	})
	return out, err
}
