package joiner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

const fleetDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

// broadcast produces one event to every partition of its topic, as the
// gateway writes scan markers and registry events.
func (f *fixture) broadcast(typ, producer string, at time.Time, payload any) {
	f.t.Helper()
	f.seq[producer]++
	r := streamtest.Event(f.t, f.names, typ, producer, f.seq[producer], at, payload)
	for p := range int32(4) {
		c := *r
		c.Partition = p
		f.produceTo(&c)
	}
}

// query returns the rows of a one-column-per-field query as
// space-separated strings.
func (f *fixture) query(q string) []string {
	f.t.Helper()
	rows, err := f.ch.Query(context.Background(), "SELECT toString(tuple(*)) FROM ("+q+")")
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestFleetCoreTables runs the joiner against the real broker and
// ClickHouse over a small fleet: the registry, a node running an
// artifact of another digest (supply_chain_violation, QUARANTINED), a
// node obeying two controllers (authority_conflict), a bundle rolling
// out, relays with sync debt, and the two registry refusals, which are
// quarantined once each with their reasons.
func TestFleetCoreTables(t *testing.T) {
	f := newFixture(t)
	const group = "joiner-fleet"
	f.broadcast(contract.TypeArtifact, "registry", t0, contract.Artifact{ArtifactID: "art-1", Version: "2.0", Digest: fleetDigest, SignedBy: "release-1"})
	f.broadcast(contract.TypePolicyBundle, "registry", t0, contract.PolicyBundle{PolicyBundleID: "pb-1", TargetVersion: "2.0",
		ArtifactID: "art-1", Deadline: t0.Add(time.Hour)})
	f.broadcast(contract.TypePolicyBundle, "registry", t0, contract.PolicyBundle{PolicyBundleID: "pb-bad", TargetVersion: "9",
		ArtifactID: "art-missing", Deadline: t0.Add(time.Hour)})
	nodes := []string{"n1", "n2", "n3", "n4"}
	for _, id := range nodes {
		f.send(contract.TypePlatformRecord, "platform", t0.Add(time.Second), contract.PlatformRecord{RecordType: "inventory_node",
			RecordID: "rec-" + id, RecordVersion: 1, ResourceFamily: contract.FamilyGPUaaS, OwningDomain: "gpuaas", DomainID: "dom-1",
			Tags: []string{"site:ams", "tier:edge"}, Provider: contract.ProviderMAAS, ProviderID: id, ExpectedState: "allocated",
			NodeKind: "EDGE", Authority: contract.Authority{MasterOfRecord: "REGION", ControllerIDs: []string{"ctl-a", "ctl-b"}},
			Desired: contract.Desired{PolicyBundleID: "pb-1", TargetVersion: "2.0"}}, -1)
	}
	beat := func(id string, at time.Time, edit func(*contract.Heartbeat)) {
		h := contract.Heartbeat{NodeID: id, AgentVersion: "1.0", HostFingerprint: "h-" + id, Health: "OK", UpdatePath: "self_update",
			ReportedVersion: "1.9", ArtifactID: "art-1", ArtifactDigest: fleetDigest, ControllerID: "ctl-a", RelayID: "relay-1",
			SecondsBehind: 5, BacklogMessages: 10, UptimeS: 60}
		if edit != nil {
			edit(&h)
		}
		f.send(contract.TypeHeartbeat, "agent-"+id, at, h, -1)
	}
	for m := range 6 {
		at := t0.Add(time.Duration(m)*time.Minute + 10*time.Second)
		beat("n1", at, func(h *contract.Heartbeat) { h.ArtifactDigest = strings.Replace(fleetDigest, "1", "2", 1) })
		beat("n2", at, func(h *contract.Heartbeat) {
			if m%2 == 1 {
				h.ControllerID = "ctl-b"
			}
		})
		beat("n3", at, func(h *contract.Heartbeat) { h.ReportedVersion = "2.0" })
	}
	beat("n4", t0.Add(2*time.Minute), func(h *contract.Heartbeat) { h.PolicyBundleID = "pb-unknown" })

	stop := f.start(group, func(o *Options) { o.Quarantine = f.quarantiner() })
	defer stop()
	f.caughtUp(group)

	// The refusals: the bad bundle once (partition 0's joiner), the
	// heartbeat once.
	got := map[string]string{}
	for _, r := range f.quarantined(2) {
		got[headersOf(r)[contract.HeaderReason]] = string(r.Key)
	}
	if got[string(contract.ReasonUnknownArtifact)] != "bundle/pb-bad" || got[string(contract.ReasonUnknownPolicyBundle)] != "maas/n4" {
		t.Fatalf("quarantined %v", got)
	}

	testenv.CheckFor(t, 30*time.Second, func() error {
		checks := []struct {
			q    string
			want []string
		}{
			{"SELECT artifact_id, digest, signed_by, revoked FROM fleet_artifacts FINAL",
				[]string{"('art-1','" + fleetDigest + "','release-1',0)"}},
			{"SELECT policy_bundle_id, target_version, artifact_id FROM policy_bundles FINAL", []string{"('pb-1','2.0','art-1')"}},
			{"SELECT node_id, phase, state, authority, supply_chain, rollout, tags, relay_id, controller_id FROM node_agent_status FINAL ORDER BY node_id",
				[]string{
					"('n1','QUARANTINED','SUPPLY_CHAIN','ok','artifact_digest_mismatch','updating',['site:ams','tier:edge'],'relay-1','ctl-a')",
					"('n2','QUARANTINED','AUTHORITY_CONFLICT','split_brain','ok','updating',['site:ams','tier:edge'],'relay-1','ctl-b')",
					"('n3','ACTIVE','LIVE_OK','ok','ok','at_target',['site:ams','tier:edge'],'relay-1','ctl-a')",
				}},
			{"SELECT evidence_id, status, tags FROM drift_evidence FINAL WHERE classification IN ('authority_conflict', 'supply_chain_violation') ORDER BY evidence_id",
				[]string{"('authority_conflict:maas/n2','open',['site:ams','tier:edge'])", "('supply_chain_violation:maas/n1','open',['site:ams','tier:edge'])"}},
			{"SELECT policy_bundle_id, domain_id, sum(nodes), sum(at_target), sum(updating), sum(pending) FROM rollout_status FINAL GROUP BY policy_bundle_id, domain_id",
				[]string{"('pb-1','dom-1',4,1,2,1)"}},
			{"SELECT node_id, seq, to_phase, to_state, reason FROM node_lifecycle_history FINAL WHERE node_id = 'n1' ORDER BY seq",
				[]string{"('n1',1,'ACTIVE','LIVE_OK','connectivity')", "('n1',2,'QUARANTINED','SUPPLY_CHAIN','supply_chain')"}},
		}
		for _, c := range checks {
			if got := f.query(c.q); !slices.Equal(got, c.want) {
				return fmt.Errorf("%s:\n got %v\nwant %v", c.q, got, c.want)
			}
		}
		// The nodes' attention tops hold the nodes that do not pass, as
		// ranked from their rows, over all domains and per domain.
		ranked := f.query("SELECT node_id, attention_score FROM node_agent_status FINAL WHERE gate != 'pass' ORDER BY attention_score DESC, node_id")
		if len(ranked) < 2 {
			return fmt.Errorf("nodes that do not pass: %v", ranked)
		}
		for _, scope := range []string{"per_domain = 0", "per_domain = 1 AND owning_domain = 'gpuaas'"} {
			top := f.query("SELECT node_id, attention_score FROM attention_top_nodes FINAL WHERE node_id != '' AND " + scope +
				" ORDER BY attention_score DESC, node_id")
			if !slices.Equal(top, ranked) {
				return fmt.Errorf("attention_top_nodes, %s: %v, ranked %v", scope, top, ranked)
			}
		}
		// Sync debt: the minutes the watermark closed, per relay.
		debt := f.query("SELECT relay_id, minute, sum(nodes), max(max_seconds_behind) FROM sync_debt_minute FINAL GROUP BY relay_id, minute ORDER BY minute")
		if len(debt) < 3 || !strings.HasPrefix(debt[0], "('relay-1',") {
			return fmt.Errorf("sync debt %v", debt)
		}
		// The ring of recent events: Kafka coordinates, newest first.
		ring := f.query("SELECT recent_events FROM node_agent_status FINAL WHERE node_id = 'n3'")
		if len(ring) != 1 || !strings.Contains(ring[0], "'"+f.names.Telemetry+"/") || !strings.Contains(ring[0], "'"+f.names.PlatformRecords+"/") {
			return fmt.Errorf("recent events %v", ring)
		}
		return nil
	})
}
