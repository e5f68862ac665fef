package api

import (
	"net/http"
	"slices"
	"sort"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// nodeParams are the filters of /v1/nodes, /v1/connectivity and the node
// half of /v1/attention, read into f.
func nodeParams(f *reader.NodeFilter) []listParam {
	return []listParam{
		{"node_id", &f.NodeIDs, nil},
		{"owning_domain", &f.OwningDomains, nil},
		{"domain_id", &f.DomainIDs, nil},
		{"gate", &f.Gates, apitypes.Gates},
		{"connectivity_mode", &f.ConnectivityModes, apitypes.ConnectivityModes},
		{"node_agent_state", &f.NodeAgentStates, apitypes.NodeAgentStates},
		{"node_agent_reason", &f.NodeAgentReasons, nil},
		{"health", &f.Healths, apitypes.Healths},
		{"workload_impact", &f.WorkloadImpacts, apitypes.WorkloadImpacts},
		{"update_path", &f.UpdatePaths, apitypes.UpdatePaths},
		{"terminal_stream_probe", &f.TerminalStreamProbes, apitypes.TerminalStreamProbes},
		{"tag", &f.Tags, nil},
	}
}

func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f reader.NodeFilter
	ps := nodeParams(&f)
	if err := parseParams(q, ps, "sort", "limit", "cursor"); err != nil {
		return err
	}
	order, err := parseSort(q, reader.NodeSorts)
	if err != nil {
		return err
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	k, err := parseKeyset(q, order.Name)
	if err != nil {
		return err
	}
	rows, err := s.read.Nodes(r.Context(), f, order, k, limit+1)
	if err != nil {
		return err
	}
	page := apitypes.NodePage{Nodes: rows, Sort: order.Name}
	if len(rows) > limit {
		page.Nodes = rows[:limit]
		page.NextCursor = encodeKeyset(order.NodeKey(rows[limit-1]))
	}
	page.Count = len(page.Nodes)
	writeJSON(w, http.StatusOK, page)
	return nil
}

// gateSummary says what each gate means (seed 000).
var gateSummary = map[string]string{
	string(contract.GatePass):            "Node-agent healthy, expected version matches, no recovery reason, required probes passed.",
	string(contract.GateWarning):         "Management evidence is stale but no workload or edge impact is observed.",
	string(contract.GateRetry):           "Bounded automatic recovery or self-update is in progress.",
	string(contract.GateInvestigate):     "Recovery evidence is incomplete, contradictory or missing: an operator must look.",
	string(contract.GateBlockProduction): "Blocks production: a severe recovery finding, cloned identity, trust-domain drift, or missing recovery evidence.",
}

func explainGate(gate string) apitypes.GateExplanation {
	g := apitypes.GateExplanation{Gate: gate, Summary: gateSummary[gate], Blocking: gate == string(contract.GateBlockProduction)}
	if g.Summary == "" {
		g.Summary = "No node-agent evidence for this node."
	}
	return g
}

func (s *Server) handleNodeDetail(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(r.URL.Query()); err != nil {
		return err
	}
	ctx := r.Context()
	id := r.PathValue("node_id")
	node, found, err := s.read.Node(ctx, id)
	if err != nil {
		return err
	}
	findings, err := s.read.FindingsOf(ctx, contract.ProviderMAAS, id)
	if err != nil {
		return err
	}
	if !found && len(findings) == 0 {
		writeJSON(w, http.StatusNotFound, apitypes.ErrorBody{Error: "no node-agent status and no finding for node_id " + id})
		return nil
	}
	d := apitypes.NodeDetail{Comparison: []apitypes.Comparison{}, Findings: []apitypes.DriftDetail{},
		Diff: []apitypes.DiffField{}, Observations: []apitypes.Observation{}}
	if found {
		d.Node = &node
		d.Gate = explainGate(d.Node.Gate)
		d.Comparison = append(d.Comparison, compare("agent_version", d.Node.ExpectedAgentVersion, d.Node.ObservedAgentVersion, "node_agent_status"))
		if err := s.fleetPanels(ctx, &d); err != nil {
			return err
		}
	} else {
		d.Gate = explainGate("")
	}
	hist, err := s.read.Histories(ctx, findingIDs(findings))
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, f := range findings {
		// Each finding carries the record's desired state and the
		// provider's observed one; open findings are the current picture.
		if !seen["state"] && (f.Status == string(contract.StatusOpen) || len(findings) == 1) {
			seen["state"] = true
			d.Comparison = append(d.Comparison, compare("state", f.ExpectedState, f.ObservedState, f.EvidenceID))
			if f.ExpectedVersion != "" || f.ObservedVersion != "" {
				d.Comparison = append(d.Comparison, compare("version", f.ExpectedVersion, f.ObservedVersion, f.EvidenceID))
			}
		}
		h := hist[f.EvidenceID]
		if h == nil {
			h = []apitypes.HistoryEntry{}
		}
		d.Findings = append(d.Findings, apitypes.DriftDetail{Finding: f, History: h, Action: recommend(f)})
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func compare(field, desired, observed, source string) apitypes.Comparison {
	return apitypes.Comparison{Field: field, Desired: desired, Observed: observed, Source: source,
		Match: desired == "" || observed == "" || desired == observed}
}

func findingIDs(fs []apitypes.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.EvidenceID
	}
	return out
}

func (s *Server) handleConnectivity(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f reader.NodeFilter
	ps := slices.DeleteFunc(nodeParams(&f), func(p listParam) bool { return p.name == "connectivity_mode" })
	if err := parseParams(q, ps); err != nil {
		return err
	}
	cells, err := s.read.Connectivity(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, foldConnectivity(cells))
	return nil
}

func foldConnectivity(cells []reader.ConnectivityCell) apitypes.Connectivity {
	modes := slices.Clone(apitypes.ConnectivityModes)
	for _, c := range cells {
		if !slices.Contains(modes, c.Mode) {
			modes = append(modes, c.Mode)
		}
	}
	sort.Strings(modes[len(apitypes.ConnectivityModes):])
	spectrum := func() []apitypes.ConnectivityCount {
		out := make([]apitypes.ConnectivityCount, len(modes))
		for i, m := range modes {
			out[i].Mode = m
		}
		return out
	}
	out := apitypes.Connectivity{Modes: spectrum(), Domains: []apitypes.ConnectivityDomain{}}
	byDomain := map[string]*apitypes.ConnectivityDomain{}
	for _, c := range cells {
		d, n := c.OwningDomain, c.Count
		i := slices.Index(modes, c.Mode)
		out.Total += n
		out.Modes[i].Count += n
		cd := byDomain[d]
		if cd == nil {
			cd = &apitypes.ConnectivityDomain{OwningDomain: d, Modes: spectrum()}
			byDomain[d] = cd
		}
		cd.Total += n
		cd.Modes[i].Count += n
	}
	for _, cd := range byDomain {
		out.Domains = append(out.Domains, *cd)
	}
	sort.Slice(out.Domains, func(i, j int) bool { return out.Domains[i].OwningDomain < out.Domains[j].OwningDomain })
	return out
}
