package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/contract"
)

// nodeParams are the filters of /v1/nodes, /v1/connectivity and the node
// half of /v1/attention.
var nodeParams = []listParam{
	{"node_id", "node_id", nil},
	{"owning_domain", "owning_domain", nil},
	{"domain_id", "domain_id", nil},
	{"gate", "gate", gates},
	{"connectivity_mode", "connectivity_mode", connectivityModes},
	{"node_agent_state", "node_agent_state", nodeAgentStates},
	{"node_agent_reason", "node_agent_reason", nil},
	{"health", "health", healths},
	{"workload_impact", "workload_impact", workloadImpacts},
	{"update_path", "update_path", updatePaths},
	{"terminal_stream_probe", "terminal_stream_probe", terminalStreamProbes},
}

// nodeSorts are the orders of /v1/nodes.
var nodeSorts = []sortSpec{
	{name: "node_id"},
	{name: "attention_score", column: "attention_score", desc: true, bind: "?"},
	{name: "last_seen_at", column: "last_seen_at", bind: "toDateTime(?)"}, // longest silent first
}

func sortNames(ss []sortSpec) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.name
	}
	return out
}

func findSort(ss []sortSpec, name string) sortSpec {
	for _, s := range ss {
		if s.name == name {
			return s
		}
	}
	panic("BUG: unknown sort " + name)
}

const nodeColumns = `node_id, domain_id, owning_domain, node_agent_state, node_agent_reason, update_path,
	expected_agent_version, observed_agent_version, cert_issuer_fingerprint, ingress_trust_fingerprint,
	host_fingerprint, terminal_stream_probe, workload_impact, health, gate, connectivity_mode,
	rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind, replay_required,
	last_seen_at, attention_score, version, updated_at`

// scanNode scans the nodeColumns of a row, then the extra columns that
// follow them into extra.
func scanNode(rows driver.Rows, extra ...any) (Node, error) {
	var (
		n                 Node
		replay            uint8
		lastSeen, updated time.Time
	)
	err := rows.Scan(append([]any{&n.NodeID, &n.DomainID, &n.OwningDomain, &n.NodeAgentState, &n.NodeAgentReason, &n.UpdatePath,
		&n.ExpectedAgentVersion, &n.ObservedAgentVersion, &n.CertIssuerFingerprint, &n.IngressTrustFingerprint,
		&n.HostFingerprint, &n.TerminalStreamProbe, &n.WorkloadImpact, &n.Health, &n.Gate, &n.ConnectivityMode,
		&n.RTTMs, &n.LossPct, &n.BandwidthKbps, &n.BacklogMessages, &n.SecondsBehind, &replay,
		&lastSeen, &n.AttentionScore, &n.Version, &updated}, extra...)...)
	n.ReplayRequired = replay != 0
	n.LastSeenAt = nullTime(lastSeen)
	n.UpdatedAt = nullTime(updated)
	n.RTTMs, n.LossPct, n.BandwidthKbps, n.AttentionScore = finite(n.RTTMs), finite(n.LossPct), finite(n.BandwidthKbps), finite(n.AttentionScore)
	return n, err
}

// nodes reads current node rows under conds, in order s, after k, at most
// limit.
func (s *Server) nodes(ctx context.Context, name string, conds []string, args []any, order sortSpec, k *keyset, limit int) ([]Node, error) {
	if k != nil {
		c, a := order.after(*k, "node_id")
		conds = append(conds, c)
		args = append(args, a...)
	}
	sql := "SELECT " + nodeColumns + " FROM node_agent_status FINAL" + whereClause(conds) +
		order.orderBy("node_id") + fmt.Sprintf(" LIMIT %d", limit)
	rows, err := s.readQuery(ctx, name, sql, args...)
	if err != nil {
		return nil, err
	}
	out := []Node{}
	err = s.scanAll(name, rows, func(r driver.Rows) error {
		n, err := scanNode(r)
		out = append(out, n)
		return err
	})
	return out, err
}

func nodeKey(order sortSpec, n Node) keyset {
	k := keyset{sort: order.name, id: n.NodeID}
	switch order.column {
	case "attention_score":
		k.key = n.AttentionScore
	case "last_seen_at":
		if n.LastSeenAt != nil {
			k.key = float64(n.LastSeenAt.Unix())
		}
	}
	return k
}

func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkKnown(q, paramNames(nodeParams, "sort", "limit", "cursor")...); err != nil {
		return err
	}
	conds, args, err := listConds(q, nodeParams)
	if err != nil {
		return err
	}
	sortName, err := parseChoice(q, "sort", "node_id", sortNames(nodeSorts))
	if err != nil {
		return err
	}
	order := findSort(nodeSorts, sortName)
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	k, err := parseKeyset(q, sortName)
	if err != nil {
		return err
	}
	rows, err := s.nodes(r.Context(), "nodes", conds, args, order, k, limit+1)
	if err != nil {
		return err
	}
	page := NodePage{Nodes: rows, Sort: sortName}
	if len(rows) > limit {
		page.Nodes = rows[:limit]
		page.NextCursor = encodeKeyset(nodeKey(order, rows[limit-1]))
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

func explainGate(gate string) GateExplanation {
	g := GateExplanation{Gate: gate, Summary: gateSummary[gate], Blocking: gate == string(contract.GateBlockProduction)}
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
	ns, err := s.nodes(ctx, "node_detail", []string{"node_id = ?"}, []any{id}, nodeSorts[0], nil, 1)
	if err != nil {
		return err
	}
	findings, err := s.findingsOf(ctx, "maas", id)
	if err != nil {
		return err
	}
	if len(ns) == 0 && len(findings) == 0 {
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: "no node-agent status and no finding for node_id " + id})
		return nil
	}
	d := NodeDetail{Comparison: []Comparison{}, Findings: []DriftDetail{}}
	if len(ns) == 1 {
		d.Node = &ns[0]
		d.Gate = explainGate(d.Node.Gate)
		d.Comparison = append(d.Comparison, compare("agent_version", d.Node.ExpectedAgentVersion, d.Node.ObservedAgentVersion, "node_agent_status"))
	} else {
		d.Gate = explainGate("")
	}
	hist, err := s.histories(ctx, findingIDs(findings))
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
			h = []HistoryEntry{}
		}
		d.Findings = append(d.Findings, DriftDetail{Finding: f, History: h, Action: recommend(f)})
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func compare(field, desired, observed, source string) Comparison {
	return Comparison{Field: field, Desired: desired, Observed: observed, Source: source,
		Match: desired == "" || observed == "" || desired == observed}
}

func findingIDs(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.EvidenceID
	}
	return out
}

// findingsOf reads every current finding of one provider identity, open
// ones first.
func (s *Server) findingsOf(ctx context.Context, provider, providerID string) ([]Finding, error) {
	rows, err := s.readQuery(ctx, "node_findings", "SELECT "+findingColumns+
		" FROM drift_evidence FINAL WHERE provider = ? AND provider_id = ? ORDER BY status = 'open' DESC, evidence_id LIMIT 1000",
		provider, providerID)
	if err != nil {
		return nil, err
	}
	out := []Finding{}
	err = s.scanAll("node_findings", rows, func(r driver.Rows) error {
		f, err := scanFinding(r)
		out = append(out, f)
		return err
	})
	return out, err
}

// histories reads the transitions of several findings, ordered by version.
func (s *Server) histories(ctx context.Context, ids []string) (map[string][]HistoryEntry, error) {
	out := map[string][]HistoryEntry{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.readQuery(ctx, "drift_history", `SELECT evidence_id, version, transition, classification, severity,
	status, posture, expected_state, observed_state, observed_version, retry_count, at, correlation_id
	FROM drift_history FINAL WHERE `+inList("evidence_id", len(ids))+` ORDER BY evidence_id, version`, args...)
	if err != nil {
		return nil, err
	}
	err = s.scanAll("drift_history", rows, func(r driver.Rows) error {
		var (
			id string
			h  HistoryEntry
		)
		err := r.Scan(&id, &h.Version, &h.Transition, &h.Classification, &h.Severity, &h.Status, &h.Posture,
			&h.ExpectedState, &h.ObservedState, &h.ObservedVersion, &h.RetryCount, &h.At, &h.CorrelationID)
		h.At = h.At.UTC()
		out[id] = append(out[id], h)
		return err
	})
	return out, err
}

func (s *Server) handleConnectivity(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	ps := slices.DeleteFunc(slices.Clone(nodeParams), func(p listParam) bool { return p.name == "connectivity_mode" })
	if err := checkKnown(q, paramNames(ps)...); err != nil {
		return err
	}
	conds, args, err := listConds(q, ps)
	if err != nil {
		return err
	}
	rows, err := s.readQuery(r.Context(), "connectivity", `SELECT owning_domain, connectivity_mode, count()
	FROM node_agent_status FINAL`+whereClause(conds)+` GROUP BY owning_domain, connectivity_mode`, args...)
	if err != nil {
		return err
	}
	type cell struct {
		domain, mode string
		n            uint64
	}
	var cells []cell
	err = s.scanAll("connectivity", rows, func(r driver.Rows) error {
		var c cell
		err := r.Scan(&c.domain, &c.mode, &c.n)
		cells = append(cells, c)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, foldConnectivity(cells, func(c cell) (string, string, uint64) { return c.domain, c.mode, c.n }))
	return nil
}

func foldConnectivity[C any](cells []C, get func(C) (domain, mode string, n uint64)) Connectivity {
	modes := slices.Clone(connectivityModes)
	for _, c := range cells {
		_, m, _ := get(c)
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	sort.Strings(modes[len(connectivityModes):])
	spectrum := func() []ConnectivityCount {
		out := make([]ConnectivityCount, len(modes))
		for i, m := range modes {
			out[i].Mode = m
		}
		return out
	}
	out := Connectivity{Modes: spectrum(), Domains: []ConnectivityDomain{}}
	byDomain := map[string]*ConnectivityDomain{}
	for _, c := range cells {
		d, m, n := get(c)
		i := slices.Index(modes, m)
		out.Total += n
		out.Modes[i].Count += n
		cd := byDomain[d]
		if cd == nil {
			cd = &ConnectivityDomain{OwningDomain: d, Modes: spectrum()}
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
