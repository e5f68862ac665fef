package reader

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

const nodeColumns = `node_id, domain_id, owning_domain, node_agent_state, node_agent_reason, update_path,
	expected_agent_version, observed_agent_version, cert_issuer_fingerprint, ingress_trust_fingerprint,
	host_fingerprint, terminal_stream_probe, workload_impact, health, gate, connectivity_mode,
	rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind, replay_required,
	last_seen_at, attention_score, version, updated_at,
	tags, node_kind, lifecycle_intent, phase, state, phase_since, transitions, master_of_record,
	controller_ids, controller_id, authority, relay_id, policy_bundle_id, target_version,
	reported_version, rollout, artifact_id, artifact_digest, supply_chain, uptime_s, recent_events`

// scanNode scans the nodeColumns of a row, then the extra columns that
// follow them into extra.
func scanNode(rows driver.Rows, extra ...any) (apitypes.Node, error) {
	var (
		n                        apitypes.Node
		replay                   uint8
		lastSeen, updated, since time.Time
	)
	fl := &n.NodeFleet
	err := rows.Scan(append([]any{&n.NodeID, &n.DomainID, &n.OwningDomain, &n.NodeAgentState, &n.NodeAgentReason, &n.UpdatePath,
		&n.ExpectedAgentVersion, &n.ObservedAgentVersion, &n.CertIssuerFingerprint, &n.IngressTrustFingerprint,
		&n.HostFingerprint, &n.TerminalStreamProbe, &n.WorkloadImpact, &n.Health, &n.Gate, &n.ConnectivityMode,
		&n.RTTMs, &n.LossPct, &n.BandwidthKbps, &n.BacklogMessages, &n.SecondsBehind, &replay,
		&lastSeen, &n.AttentionScore, &n.Version, &updated,
		&fl.Tags, &fl.NodeKind, &fl.LifecycleIntent, &fl.Phase, &fl.State, &since, &fl.Transitions, &fl.MasterOfRecord,
		&fl.ControllerIDs, &fl.ControllerID, &fl.Authority, &fl.RelayID, &fl.PolicyBundleID, &fl.TargetVersion,
		&fl.ReportedVersion, &fl.Rollout, &fl.ArtifactID, &fl.ArtifactDigest, &fl.SupplyChain, &fl.UptimeS, &fl.RecentEvents}, extra...)...)
	fl.PhaseSince = nullTime(since)
	fl.Tags, fl.ControllerIDs, fl.RecentEvents = nonNil(fl.Tags), nonNil(fl.ControllerIDs), nonNil(fl.RecentEvents)
	n.ReplayRequired = replay != 0
	n.LastSeenAt = nullTime(lastSeen)
	n.UpdatedAt = nullTime(updated)
	n.RTTMs, n.LossPct, n.BandwidthKbps, n.AttentionScore = finite(n.RTTMs), finite(n.LossPct), finite(n.BandwidthKbps), finite(n.AttentionScore)
	return n, err
}

// nodeRow scans the nodeColumns of a row.
func nodeRow(r driver.Rows) (apitypes.Node, error) { return scanNode(r) }

// Nodes reads up to limit current nodes matching f after the position
// after (nil: from the first), in order.
func (rd *Reader) Nodes(ctx context.Context, f NodeFilter, order Sort, after *Keyset, limit int) ([]apitypes.Node, error) {
	conds, args := f.where()
	if limit > 0 {
		return rankedPage(ctx, rd, "nodes", nodeTable, order, conds, args, after, limit)
	}
	return rd.nodes(ctx, "nodes", conds, args, order, after, limit)
}

// Node reads the current row of one node; ok is false if there is none.
func (rd *Reader) Node(ctx context.Context, id string) (n apitypes.Node, ok bool, err error) {
	ns, err := rd.nodes(ctx, "node_detail", []string{"node_id = ?"}, []any{id}, NodeSorts[0], nil, 1)
	if err != nil || len(ns) == 0 {
		return n, false, err
	}
	return ns[0], true, nil
}

func (rd *Reader) nodes(ctx context.Context, name string, conds []string, args []any, order Sort, after *Keyset, limit int) ([]apitypes.Node, error) {
	sql, args := listSQL(nodeColumns, "node_agent_status", "node_id", conds, args, order, after, limit)
	return list(ctx, rd, name, sql, args, []apitypes.Node{}, nodeRow)
}

// ConnectivityCell is the number of current nodes of one owning domain in
// one connectivity mode.
type ConnectivityCell struct {
	OwningDomain, Mode string
	Count              uint64
}

// Connectivity counts the current nodes matching f by owning domain and
// connectivity mode.
func (rd *Reader) Connectivity(ctx context.Context, f NodeFilter) ([]ConnectivityCell, error) {
	conds, args := f.where()
	return list(ctx, rd, "connectivity", `SELECT owning_domain, connectivity_mode, count()
	FROM node_agent_status FINAL`+whereClause(conds)+` GROUP BY owning_domain, connectivity_mode`, args, nil,
		func(r driver.Rows) (ConnectivityCell, error) {
			var c ConnectivityCell
			err := r.Scan(&c.OwningDomain, &c.Mode, &c.Count)
			return c, err
		})
}
