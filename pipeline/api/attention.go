package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/contract"
)

// Attention queue sizes.
const (
	DefaultAttentionN = 20
	MaxAttentionN     = 1000
)

// findingOnlyParams select findings only: given one, nodes leave the queue.
var findingOnlyParams = []string{"product", "product_id", "resource_family", "classification", "severity", "provider", "age"}

// nodeOnlyParams select nodes only: given one, findings leave the queue.
var nodeOnlyParams = []string{"gate", "connectivity_mode", "health", "node_agent_state"}

func (s *Server) handleAttention(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if st, ok := single(q, "status"); ok && st != string(contract.StatusOpen) {
		return &ParamError{Param: "status", Value: st, Reason: "the attention queue holds open findings only", Allowed: []string{string(contract.StatusOpen)}}
	}
	// Drift filters and the node-only ones are parsed apart: parseFilter
	// must not see the node parameters and the node conditions must not
	// see the drift ones.
	dq, nq := url.Values{}, url.Values{}
	for k, v := range q {
		switch {
		case slices.Contains(nodeOnlyParams, k):
			nq[k] = v
		case k == "owning_domain" || k == "domain_id":
			dq[k], nq[k] = v, v
		default:
			dq[k] = v
		}
	}
	f, err := parseFilter(dq, "n", "by", "kind")
	if err != nil {
		return err
	}
	f.Status = string(contract.StatusOpen)
	ps := slices.DeleteFunc(slices.Clone(nodeParams), func(p listParam) bool {
		return !slices.Contains(nodeOnlyParams, p.name) && p.name != "owning_domain" && p.name != "domain_id"
	})
	nconds, nargs, err := listConds(nq, ps)
	if err != nil {
		return err
	}
	n, err := parseInt(q, "n", DefaultAttentionN, 1, MaxAttentionN)
	if err != nil {
		return err
	}
	by, err := parseChoice(q, "by", "global", []string{"global", "domain"})
	if err != nil {
		return err
	}
	kind, err := parseChoice(q, "kind", "all", []string{"all", KindFinding, KindNode})
	if err != nil {
		return err
	}
	wantFindings, wantNodes := kind != KindNode, kind != KindFinding
	for _, p := range findingOnlyParams {
		if len(q[p]) > 0 && kind != KindNode {
			wantNodes = false
		}
	}
	for _, p := range nodeOnlyParams {
		if len(q[p]) > 0 && kind != KindFinding {
			wantFindings = false
		}
	}

	// The findings and the nodes are read at the same time.
	ctx := r.Context()
	var (
		wg         sync.WaitGroup
		fs         []Finding
		ns         []Node
		ferr, nerr error
	)
	if wantFindings {
		wg.Go(func() {
			if rankedFilter(f, n) {
				fs, ferr = s.rankedFindings(ctx, f.OwningDomains, n, by == "domain")
				return
			}
			conds, args := f.where(s.opts.Now())
			fs, ferr = s.topFindings(ctx, conds, args, n, by == "domain")
		})
	}
	if wantNodes {
		wg.Go(func() {
			if by == "domain" {
				ns, nerr = s.topNodes(ctx, nconds, nargs, n, true)
				return
			}
			ns, nerr = s.rankedNodes(ctx, nconds, nargs, n)
		})
	}
	wg.Wait()
	if err := cmp.Or(ferr, nerr); err != nil {
		return err
	}
	items := make([]AttentionItem, 0, len(fs)+len(ns))
	for i := range fs {
		items = append(items, AttentionItem{Kind: KindFinding, ID: fs[i].EvidenceID, AttentionScore: fs[i].AttentionScore,
			OwningDomain: fs[i].OwningDomain, DomainID: fs[i].DomainID, Finding: &fs[i]})
	}
	for i := range ns {
		items = append(items, AttentionItem{Kind: KindNode, ID: ns[i].NodeID, AttentionScore: ns[i].AttentionScore,
			OwningDomain: ns[i].OwningDomain, DomainID: ns[i].DomainID, Node: &ns[i]})
	}
	writeJSON(w, http.StatusOK, foldAttention(items, n, by == "domain"))
	return nil
}

// rankItems orders by score descending, then findings before nodes, then
// id, so equal scores give a stable queue.
func rankItems(items []AttentionItem) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.AttentionScore != b.AttentionScore {
			return a.AttentionScore > b.AttentionScore
		}
		if a.Kind != b.Kind {
			return a.Kind == KindFinding
		}
		return a.ID < b.ID
	})
}

func foldAttention(items []AttentionItem, n int, byDomain bool) Attention {
	rankItems(items)
	out := Attention{N: n, Global: []AttentionItem{}}
	if !byDomain {
		out.Global = append(out.Global, items[:min(n, len(items))]...)
		return out
	}
	// Each domain's top n came from ClickHouse; the global top n is among
	// their union.
	out.Global = append(out.Global, items[:min(n, len(items))]...)
	idx := map[string]int{}
	for _, it := range items {
		i, ok := idx[it.OwningDomain]
		if !ok {
			i = len(out.Domains)
			idx[it.OwningDomain] = i
			out.Domains = append(out.Domains, AttentionDomain{OwningDomain: it.OwningDomain})
		}
		if len(out.Domains[i].Items) < n {
			out.Domains[i].Items = append(out.Domains[i].Items, it)
		}
	}
	sort.Slice(out.Domains, func(i, j int) bool { return out.Domains[i].OwningDomain < out.Domains[j].OwningDomain })
	if out.Domains == nil {
		out.Domains = []AttentionDomain{}
	}
	return out
}

// topFindings reads the n open findings of highest attention_score, over
// all (perDomain false) or per owning domain (LIMIT BY, which 18.16 has).
func (s *Server) topFindings(ctx context.Context, conds []string, args []any, n int, perDomain bool) ([]Finding, error) {
	order, limit := " ORDER BY attention_score DESC, evidence_id", fmt.Sprintf(" LIMIT %d", n)
	if perDomain {
		order = " ORDER BY owning_domain, attention_score DESC, evidence_id"
		limit = fmt.Sprintf(" LIMIT %d BY owning_domain", n)
	}
	rows, err := s.readQuery(ctx, "attention_findings", "SELECT "+findingColumns+" FROM drift_evidence FINAL"+
		whereClause(conds)+order+limit, args...)
	if err != nil {
		return nil, err
	}
	var out []Finding
	err = s.scanAll("attention_findings", rows, func(r driver.Rows) error {
		f, err := scanFinding(r)
		out = append(out, f)
		return err
	})
	return out, err
}

// topNodes reads the n current nodes of highest attention_score under
// conds whose gate does not pass, over all (perDomain false) or per owning
// domain, collapsing node_agent_status with FINAL.
func (s *Server) topNodes(ctx context.Context, conds []string, args []any, n int, perDomain bool) ([]Node, error) {
	order, limit := " ORDER BY attention_score DESC, node_id", fmt.Sprintf(" LIMIT %d", n)
	if perDomain {
		order = " ORDER BY owning_domain, attention_score DESC, node_id"
		limit = fmt.Sprintf(" LIMIT %d BY owning_domain", n)
	}
	// A node whose gate passes needs no attention whatever its score.
	conds = append(slices.Clone(conds), "gate != '"+string(contract.GatePass)+"'")
	rows, err := s.readQuery(ctx, "attention_nodes", "SELECT "+nodeColumns+" FROM node_agent_status FINAL"+
		whereClause(conds)+order+limit, args...)
	if err != nil {
		return nil, err
	}
	var out []Node
	err = s.scanAll("attention_nodes", rows, func(r driver.Rows) error {
		nd, err := scanNode(r)
		out = append(out, nd)
		return err
	})
	return out, err
}
