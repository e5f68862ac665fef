package api

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
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
		case k == "owning_domain" || k == "domain_id" || k == "tag":
			dq[k], nq[k] = v, v
		default:
			dq[k] = v
		}
	}
	f, err := parseFilter(dq, s.opts.Now(), "n", "by", "kind")
	if err != nil {
		return err
	}
	f.Status = string(contract.StatusOpen)
	var nf reader.NodeFilter
	ps := slices.DeleteFunc(nodeParams(&nf), func(p listParam) bool {
		return !slices.Contains(nodeOnlyParams, p.name) && p.name != "owning_domain" && p.name != "domain_id" && p.name != "tag"
	})
	if err := parseLists(nq, ps); err != nil {
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
	kind, err := parseChoice(q, "kind", "all", []string{"all", apitypes.KindFinding, apitypes.KindNode})
	if err != nil {
		return err
	}
	wantFindings, wantNodes := kind != apitypes.KindNode, kind != apitypes.KindFinding
	for _, p := range findingOnlyParams {
		if len(q[p]) > 0 && kind != apitypes.KindNode {
			wantNodes = false
		}
	}
	for _, p := range nodeOnlyParams {
		if len(q[p]) > 0 && kind != apitypes.KindFinding {
			wantFindings = false
		}
	}

	// The findings and the nodes are read at the same time.
	ctx := r.Context()
	var (
		wg         sync.WaitGroup
		fs         []apitypes.Finding
		ns         []apitypes.Node
		ferr, nerr error
	)
	if wantFindings {
		wg.Go(func() { fs, ferr = s.read.TopFindings(ctx, f, n, by == "domain") })
	}
	if wantNodes {
		wg.Go(func() { ns, nerr = s.read.TopNodes(ctx, nf, n, by == "domain") })
	}
	wg.Wait()
	if err := cmp.Or(ferr, nerr); err != nil {
		return err
	}
	items := make([]apitypes.AttentionItem, 0, len(fs)+len(ns))
	for i := range fs {
		items = append(items, apitypes.AttentionItem{Kind: apitypes.KindFinding, ID: fs[i].EvidenceID, AttentionScore: fs[i].AttentionScore,
			OwningDomain: fs[i].OwningDomain, DomainID: fs[i].DomainID, Finding: &fs[i]})
	}
	for i := range ns {
		items = append(items, apitypes.AttentionItem{Kind: apitypes.KindNode, ID: ns[i].NodeID, AttentionScore: ns[i].AttentionScore,
			OwningDomain: ns[i].OwningDomain, DomainID: ns[i].DomainID, Node: &ns[i]})
	}
	writeJSON(w, http.StatusOK, foldAttention(items, n, by == "domain"))
	return nil
}

// rankItems orders by score descending, then findings before nodes, then
// id, so equal scores give a stable queue.
func rankItems(items []apitypes.AttentionItem) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.AttentionScore != b.AttentionScore {
			return a.AttentionScore > b.AttentionScore
		}
		if a.Kind != b.Kind {
			return a.Kind == apitypes.KindFinding
		}
		return a.ID < b.ID
	})
}

func foldAttention(items []apitypes.AttentionItem, n int, byDomain bool) apitypes.Attention {
	rankItems(items)
	out := apitypes.Attention{N: n, Global: []apitypes.AttentionItem{}}
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
			out.Domains = append(out.Domains, apitypes.AttentionDomain{OwningDomain: it.OwningDomain})
		}
		if len(out.Domains[i].Items) < n {
			out.Domains[i].Items = append(out.Domains[i].Items, it)
		}
	}
	sort.Slice(out.Domains, func(i, j int) bool { return out.Domains[i].OwningDomain < out.Domains[j].OwningDomain })
	if out.Domains == nil {
		out.Domains = []apitypes.AttentionDomain{}
	}
	return out
}
