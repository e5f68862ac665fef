package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// fleetNode is one node_agent_status row version with the fleet core's
// columns (migration 013).
type fleetNode struct {
	id, domainID, owning              string
	tags                              []string
	phase, state                      string
	master                            string
	controllers                       []string
	controller, authority, relay      string
	bundle, target, reported, rollout string
	artifact, digest, supply          string
	backlog, behind                   int64
	replay                            bool
	recent                            []string
	version                           uint64
}

func insertFleetNodes(t *testing.T, db driver.Conn, rows ...fleetNode) {
	t.Helper()
	for _, n := range rows {
		replay := uint8(0)
		if n.replay {
			replay = 1
		}
		insert(t, db, `INSERT INTO node_agent_status (node_id, domain_id, owning_domain, node_agent_state,
			node_agent_reason, update_path, expected_agent_version, observed_agent_version, cert_issuer_fingerprint,
			ingress_trust_fingerprint, host_fingerprint, terminal_stream_probe, workload_impact, health, gate,
			connectivity_mode, rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind, replay_required,
			last_seen_at, attention_score, version, updated_at,
			tags, node_kind, lifecycle_intent, phase, state, phase_since, transitions, master_of_record, controller_ids,
			controller_id, authority, relay_id, policy_bundle_id, target_version, reported_version, rollout,
			artifact_id, artifact_digest, supply_chain, uptime_s, recent_events)`,
			n.id, n.domainID, n.owning, "healthy", "", "self_update", "1.4.2", "1.4.2", "sha256:ca", "sha256:ing",
			"host-"+n.id, "passed", "none_observed", "OK", "warning", "LIVE", 12.5, 0.0, 1000.0, n.backlog, n.behind, replay,
			t0.Add(-time.Minute), 10.0, n.version, t0,
			n.tags, "EDGE", "ACTIVE", n.phase, n.state, t0.Add(-time.Hour), uint64(2), n.master, n.controllers,
			n.controller, n.authority, n.relay, n.bundle, n.target, n.reported, n.rollout,
			n.artifact, n.digest, n.supply, int64(3600), n.recent)
	}
}

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// seedFleet gives the nodes of seedNodes their fleet columns (a newer
// version of each row), and writes the fleet core's tables: transitions,
// rollouts and sync debt over two joiner partitions, the registry.
func seedFleet(t *testing.T, db driver.Conn) {
	t.Helper()
	insertFleetNodes(t, db,
		fleetNode{id: "n1", domainID: "d-eu1", owning: "compute", tags: []string{"gpu", "eu"}, phase: "ACTIVE", state: "LIVE_OK",
			master: "LOCAL", controllers: []string{"ctl-a"}, controller: "ctl-a", authority: "ok", relay: "relay-1",
			bundle: "pb-1", target: "2.0", reported: "2.0", rollout: "at_target", artifact: "art-1", digest: digestA, supply: "ok",
			backlog: 5, behind: 30, version: 10},
		fleetNode{id: "n2", domainID: "d-eu1", owning: "compute", tags: []string{"gpu"}, phase: "QUARANTINED", state: "AUTHORITY_CONFLICT",
			master: "REGION", controllers: []string{"ctl-a"}, controller: "ctl-b", authority: "controller_not_listed", relay: "relay-1",
			bundle: "pb-1", target: "2.0", reported: "1.9", rollout: "updating", artifact: "art-1", digest: "sha256:bad", supply: "artifact_digest_mismatch",
			backlog: 400, behind: 600, replay: true, version: 10},
		fleetNode{id: "n3", domainID: "d-us1", owning: "compute", tags: []string{"eu"}, phase: "ACTIVE", state: "LIVE_OK",
			master: "GLOBAL", relay: "", version: 10},
		fleetNode{id: "e9", domainID: "d-us1", owning: "edge", phase: "RETIRED", state: "RETIRED", relay: "relay-9", backlog: 9, behind: 900, version: 10},
	)
	for i, tr := range []struct{ from, to, reason string }{
		{"", "PROVISIONING", "provisioning"}, {"PROVISIONING", "ACTIVE", "connectivity"}, {"ACTIVE", "QUARANTINED", "authority_conflict"},
	} {
		for range 2 { // a replay writes the same (node_id, seq) again
			insert(t, db, `INSERT INTO node_lifecycle_history (node_id, seq, domain_id, from_phase, from_state, to_phase, to_state,
				reason, at, correlation_id, updated_at)`, "n2", uint64(i+1), "d-eu1", tr.from, tr.from, tr.to, tr.to, tr.reason,
				t0.Add(time.Duration(i-3)*time.Hour), "corr-"+tr.reason, t0)
		}
	}
	deadline := t0.Add(24 * time.Hour)
	rollout := func(bundle, domain string, partition uint32, nodes, at, upd, beh, fail, pend uint32, version uint64) {
		insert(t, db, `INSERT INTO rollout_status (policy_bundle_id, domain_id, partition, target_version, artifact_id, deadline,
			nodes, at_target, updating, behind, failed, pending, as_of, version, updated_at)`,
			bundle, domain, partition, "2.0", "art-1", deadline, nodes, at, upd, beh, fail, pend, t0, version, t0)
	}
	rollout("pb-1", "d-eu1", 0, 9, 9, 0, 0, 0, 0, 1) // superseded by version 2
	rollout("pb-1", "d-eu1", 0, 3, 1, 1, 0, 1, 0, 2)
	rollout("pb-1", "d-eu1", 1, 2, 1, 0, 1, 0, 0, 1)
	rollout("pb-1", "d-us1", 0, 4, 0, 0, 0, 0, 4, 1)
	rollout("pb-2", "d-us1", 1, 1, 1, 0, 0, 0, 0, 1)
	debt := func(domain, relay string, minute time.Time, partition, nodes uint32, behind, backlog int64) {
		insert(t, db, `INSERT INTO sync_debt_minute (domain_id, relay_id, minute, partition, nodes, max_seconds_behind,
			backlog_messages, version, updated_at)`, domain, relay, minute, partition, nodes, behind, backlog, uint64(1), t0)
	}
	m0 := t0.Add(-3 * time.Minute)
	debt("d-eu1", "relay-1", m0, 0, 2, 30, 10)
	debt("d-eu1", "relay-1", m0, 1, 1, 90, 5)
	debt("d-eu1", "relay-1", m0.Add(time.Minute), 0, 2, 60, 20)
	debt("d-eu1", "relay-1", m0.Add(2*time.Minute), 0, 2, 10, 1)
	debt("d-us1", "", m0, 0, 1, 0, 0)
	artifact := func(digest string, revoked uint8, version uint64) {
		insert(t, db, `INSERT INTO fleet_artifacts (artifact_id, artifact_version, digest, signed_by, sbom_ref, provenance_ref,
			revoked, occurred_at, version, updated_at)`, "art-1", "2.0", digest, "release-key", "sbom://art-1", "prov://art-1",
			revoked, t0.Add(-time.Hour), version, t0)
	}
	artifact("sha256:old", 0, 1)
	artifact(digestA, 1, 2)
	// The findings of n1 carry the record's tags.
	ctx := context.Background()
	for _, q := range []string{
		`ALTER TABLE drift_evidence UPDATE tags = ['gpu', 'eu'] WHERE provider_id = 'n1'`,
		`ALTER TABLE drift_evidence UPDATE tags = ['gpu'] WHERE provider_id = 'n2'`,
	} {
		if err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	testenv.CheckFor(t, 10*time.Second, func() error {
		var n uint64
		if err := db.QueryRow(ctx, `SELECT count() FROM drift_evidence WHERE has(tags, 'gpu')`).Scan(&n); err != nil {
			return err
		}
		if n < 3 {
			return fmt.Errorf("tags on %d rows", n)
		}
		return nil
	})
}

func newFleetFixture(t *testing.T, opts api.Options) *fixture {
	fx := newSurfaceFixture(t, opts)
	seedFleet(t, fx.db)
	return fx
}

func TestFleetEndpoints(t *testing.T) {
	fx := newFleetFixture(t, api.Options{})

	// The timeline: newest first, replays collapsed.
	tl := decode[apitypes.Timeline](t, testenv.GetJSON(t, fx.url+"/v1/nodes/n2/timeline", 200))
	if tl.Count != 3 || tl.Transitions[0].Seq != 3 || tl.Transitions[0].ToPhase != "QUARANTINED" ||
		tl.Transitions[0].Reason != "authority_conflict" || tl.Transitions[2].FromPhase != "" || tl.Transitions[2].CorrelationID != "corr-provisioning" {
		t.Errorf("timeline of n2: %+v", tl)
	}
	if tl := decode[apitypes.Timeline](t, testenv.GetJSON(t, fx.url+"/v1/nodes/n2/timeline?limit=1", 200)); tl.Count != 1 {
		t.Errorf("timeline limit=1: %+v", tl)
	}
	if tl := decode[apitypes.Timeline](t, testenv.GetJSON(t, fx.url+"/v1/nodes/zz/timeline", 200)); tl.Count != 0 || tl.Transitions == nil {
		t.Errorf("timeline of an unknown node: %+v", tl)
	}

	// Rollouts: partitions' current rows summed per bundle and domain.
	ro := decode[apitypes.Rollouts](t, testenv.GetJSON(t, fx.url+"/v1/rollouts", 200))
	if len(ro.Rollouts) != 2 {
		t.Fatalf("rollouts: %+v", ro)
	}
	pb1 := ro.Rollouts[0]
	want := apitypes.RolloutCounts{Nodes: 9, AtTarget: 2, Updating: 1, Behind: 1, Failed: 1, Pending: 4}
	if pb1.PolicyBundleID != "pb-1" || pb1.RolloutCounts != want || pb1.TargetVersion != "2.0" || pb1.Deadline == nil ||
		len(pb1.Domains) != 2 || pb1.Domains[0].DomainID != "d-eu1" ||
		pb1.Domains[0].RolloutCounts != (apitypes.RolloutCounts{Nodes: 5, AtTarget: 2, Updating: 1, Behind: 1, Failed: 1}) {
		t.Errorf("rollout of pb-1: %+v", pb1)
	}
	ro = decode[apitypes.Rollouts](t, testenv.GetJSON(t, fx.url+"/v1/rollouts?domain_id=d-us1&policy_bundle_id=pb-1", 200))
	if len(ro.Rollouts) != 1 || ro.Rollouts[0].Nodes != 4 || len(ro.Rollouts[0].Domains) != 1 {
		t.Errorf("rollouts of pb-1 in d-us1: %+v", ro)
	}

	// Relays: nodes that reported and are not retired, per domain and
	// relay, worst first.
	rl := decode[apitypes.Relays](t, testenv.GetJSON(t, fx.url+"/v1/relays", 200))
	if len(rl.Domains) != 2 || rl.Domains[0].DomainID != "d-eu1" || rl.Domains[0].Nodes != 2 ||
		rl.Domains[0].MaxSecondsBehind != 600 || rl.Domains[0].BacklogMessages != 405 ||
		len(rl.Domains[0].Relays) != 1 || rl.Domains[0].Relays[0].RelayID != "relay-1" ||
		rl.Domains[1].Nodes != 1 || rl.Domains[1].Relays[0].RelayID != "" {
		t.Errorf("relays: %+v", rl)
	}
	rl = decode[apitypes.Relays](t, testenv.GetJSON(t, fx.url+"/v1/relays?tag=eu", 200))
	if len(rl.Domains) != 2 || rl.Domains[0].Nodes != 1 || rl.Domains[0].MaxSecondsBehind != 30 {
		t.Errorf("relays tag=eu: %+v", rl)
	}

	// Sync debt: per minute, partitions summed (max of the seconds).
	sd := decode[apitypes.SyncDebt](t, testenv.GetJSON(t, fx.url+"/v1/syncdebt?domain_id=d-eu1", 200))
	if len(sd.Series) != 1 || sd.Points != 3 || sd.Truncated {
		t.Fatalf("sync debt of d-eu1: %+v", sd)
	}
	if p := sd.Series[0].Points[0]; p.Nodes != 3 || p.MaxSecondsBehind != 90 || p.BacklogMessages != 15 || !p.Minute.Equal(t0.Add(-3*time.Minute)) {
		t.Errorf("first minute: %+v", p)
	}
	from := url.QueryEscape(t0.Add(-2 * time.Minute).Format(time.RFC3339))
	sd = decode[apitypes.SyncDebt](t, testenv.GetJSON(t, fx.url+"/v1/syncdebt?from="+from, 200))
	if sd.Points != 2 {
		t.Errorf("sync debt from -2m: %+v", sd)
	}
	// Times a DateTime cannot hold select as its ends do (a to in 2150
	// selected nothing).
	sd = decode[apitypes.SyncDebt](t, testenv.GetJSON(t, fx.url+"/v1/syncdebt?domain_id=d-eu1&from=1960-01-01T00:00:00Z&to=2150-01-01T00:00:00Z", 200))
	if sd.Points != 3 {
		t.Errorf("sync debt from 1960 to 2150: %+v", sd)
	}
	sd = decode[apitypes.SyncDebt](t, testenv.GetJSON(t, fx.url+"/v1/syncdebt?domain_id=d-eu1&last=90s", 200))
	if sd.Points != 2 || !sd.Series[0].Points[0].Minute.Equal(t0.Add(-2*time.Minute)) {
		t.Errorf("sync debt last=90s: %+v", sd)
	}
	if rl := decode[apitypes.Relays](t, testenv.GetJSON(t, fx.url+"/v1/relays?owning_domain=edge", 200)); len(rl.Domains) != 0 {
		t.Errorf("relays of edge (its one node retired): %+v", rl)
	}
	sd = decode[apitypes.SyncDebt](t, testenv.GetJSON(t, fx.url+"/v1/syncdebt?limit=2", 200))
	if sd.Points != 2 || !sd.Truncated {
		t.Errorf("sync debt limit=2: %+v", sd)
	}

	// Arrow streams of each.
	for _, tc := range []struct {
		path, col string
		want      []string
	}{
		{"/v1/nodes/n2/timeline", "to_phase", []string{"QUARANTINED", "ACTIVE", "PROVISIONING"}},
		{"/v1/rollouts", "domain_id", []string{"d-eu1", "d-us1", "d-us1"}},
		{"/v1/relays", "relay_id", []string{"relay-1", ""}},
		{"/v1/syncdebt?domain_id=d-us1", "domain_id", []string{"d-us1"}},
	} {
		got, _ := readArrowStream(t, fx.url+tc.path, tc.col)
		if !slices.Equal(got, tc.want) {
			t.Errorf("arrow %s: %s %v, want %v", tc.path, tc.col, got, tc.want)
		}
	}

	// Bad parameters: a clear 400 naming the parameter.
	for _, tc := range []struct{ path, param string }{
		{"/v1/rollouts?tag=gpu", "tag"},
		{"/v1/relays?relay=x", "relay"},
		{"/v1/syncdebt?from=yesterday", "from"},
		{"/v1/syncdebt?from=" + from + "&to=" + from, "to"},
		{"/v1/syncdebt?limit=0", "limit"},
		{"/v1/syncdebt?last=-1m", "last"},
		{"/v1/nodes/n2/timeline?limit=x", "limit"},
		{"/v1/nodes/n2/timeline?seq=1", "seq"},
		{"/v1/drift?tag=", "tag"},
	} {
		eb := decode[apitypes.ErrorBody](t, testenv.GetJSON(t, fx.url+tc.path, http.StatusBadRequest))
		if eb.Parameter != tc.param {
			t.Errorf("%s: parameter %q, want %q (%s)", tc.path, eb.Parameter, tc.param, eb.Error)
		}
	}
}

// TestTagFilters checks tag= on the drift list, the heat map, the
// attention queue and the nodes: repeated tags must all match.
func TestTagFilters(t *testing.T) {
	fx := newFleetFixture(t, api.Options{})
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"tag=gpu", sorted(idMissing, idIdentity)},
		{"tag=gpu&tag=eu", []string{idMissing}},
		{"tag=gpu,eu", []string{idMissing}},
		{"tag=nope", nil},
	} {
		p := decode[apitypes.DriftPage](t, testenv.GetJSON(t, fx.url+"/v1/drift?"+tc.query, 200))
		if got := ids(p.Findings); !slices.Equal(got, tc.want) {
			t.Errorf("drift %s: %v, want %v", tc.query, got, tc.want)
		}
	}
	hm := decode[apitypes.Heatmap](t, testenv.GetJSON(t, fx.url+"/v1/heatmap?tag=gpu", 200))
	var n uint64
	for _, c := range hm.Cells {
		n += c.Count
	}
	if n != 2 {
		t.Errorf("heat map tag=gpu counts %d findings, want 2: %+v", n, hm.Cells)
	}
	if !slices.Contains(hm.Classifications, string(contract.ClassAuthority)) || !slices.Contains(hm.Classifications, string(contract.ClassSupplyChain)) {
		t.Errorf("heat map columns lack the fleet classifications: %v", hm.Classifications)
	}
	at := decode[apitypes.Attention](t, testenv.GetJSON(t, fx.url+"/v1/attention?tag=eu", 200))
	var items []string
	for _, it := range at.Global {
		items = append(items, it.ID)
	}
	slices.Sort(items)
	if !slices.Equal(items, []string{idMissing, "n1", "n3"}) {
		t.Errorf("attention tag=eu: %v", items)
	}
	np := decode[apitypes.NodePage](t, testenv.GetJSON(t, fx.url+"/v1/nodes?tag=gpu&tag=eu", 200))
	if got := nodeIDs(np.Nodes); !slices.Equal(got, []string{"n1"}) || !slices.Equal(np.Nodes[0].Tags, []string{"gpu", "eu"}) {
		t.Errorf("nodes tag=gpu&tag=eu: %v %+v", got, np.Nodes)
	}
}

// TestNodePageFleet checks the node page's fleet panels, and its
// observations timeline read from Kafka: fetched, past retention,
// malformed, and Kafka unreachable (coordinates only, still 200).
func TestNodePageFleet(t *testing.T) {
	brokers, names := testenv.Kafka(t, 2)
	cl := testenv.KafkaClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	env := func(typ, id string, payload any) []byte {
		p, _ := json.Marshal(payload)
		b, _ := json.Marshal(map[string]any{"event_id": id, "event_type": typ, "schema_version": 1, "producer": "agent-n2",
			"occurred_at": t0.Add(-time.Minute), "environment": "local_parity", "payload": json.RawMessage(p)})
		return b
	}
	var coords []string
	for i, v := range [][]byte{
		env(contract.TypeHeartbeat, "e1", map[string]any{"node_id": "n2", "controller_id": "ctl-b", "backlog_messages": 400}),
		env(contract.TypeHeartbeat, "e2", map[string]any{"node_id": "n2", "controller_id": "ctl-b"}),
		env(contract.TypeHeartbeat, "e3", map[string]any{"node_id": "n2", "controller_id": "ctl-a"}),
	} {
		rec := &kgo.Record{Topic: names.Telemetry, Partition: 1, Key: []byte("maas/n2"), Value: v}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		coords = append(coords, fmt.Sprintf("%s/%d/%d", rec.Topic, rec.Partition, rec.Offset))
		_ = i
	}
	// The first record passes retention.
	adm := kadm.NewClient(cl)
	var off kadm.Offsets
	off.Add(kadm.Offset{Topic: names.Telemetry, Partition: 1, At: 1})
	if res, err := adm.DeleteRecords(ctx, off); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	recent := []string{coords[2], coords[1], coords[0], "garbage"}

	fx := newFleetFixture(t, api.Options{Events: api.NewKafkaEvents(cl, 5*time.Second)})
	insertFleetNodes(t, fx.db, fleetNode{id: "n2", domainID: "d-eu1", owning: "compute", tags: []string{"gpu"}, phase: "QUARANTINED",
		state: "AUTHORITY_CONFLICT", master: "REGION", controllers: []string{"ctl-a"}, controller: "ctl-b", authority: "controller_not_listed",
		relay: "relay-1", bundle: "pb-1", target: "2.0", reported: "1.9", rollout: "updating", artifact: "art-1", digest: "sha256:bad",
		supply: "artifact_digest_mismatch", backlog: 400, behind: 600, replay: true, recent: recent, version: 11})

	d := decode[apitypes.NodeDetail](t, testenv.GetJSON(t, fx.url+"/v1/nodes/n2", 200))
	if d.Lifecycle == nil || d.Lifecycle.Phase != "QUARANTINED" || d.Lifecycle.State != "AUTHORITY_CONFLICT" || len(d.Lifecycle.Recent) != 3 ||
		d.Lifecycle.Since == nil {
		t.Errorf("lifecycle: %+v", d.Lifecycle)
	}
	if d.Authority == nil || d.Authority.MasterOfRecord != "REGION" || d.Authority.ControllerID != "ctl-b" || d.Authority.State != "controller_not_listed" {
		t.Errorf("authority: %+v", d.Authority)
	}
	if sc := d.SupplyChain; sc == nil || sc.State != "artifact_digest_mismatch" || sc.Registry == nil || sc.Registry.Digest != digestA ||
		!sc.Registry.Revoked || sc.Registry.SBOMRef != "sbom://art-1" {
		t.Errorf("supply chain: %+v", d.SupplyChain)
	}
	if r := d.Replay; r == nil || !r.ReplayRequired || r.BacklogMessages != 400 || r.SecondsBehind != 600 {
		t.Errorf("replay: %+v", d.Replay)
	}
	diff := map[string]apitypes.DiffField{}
	for _, f := range d.Diff {
		diff[f.Field] = f
	}
	for field, want := range map[string]apitypes.DiffField{
		"agent_version":   {Field: "agent_version", Desired: "1.4.2", Actual: "1.4.2", Equal: true, Known: true},
		"version":         {Field: "version", Desired: "2.0", Actual: "1.9", Equal: false, Known: true},
		"artifact_digest": {Field: "artifact_digest", Desired: digestA, Actual: "sha256:bad", Equal: false, Known: true},
	} {
		if diff[field] != want {
			t.Errorf("diff %s: %+v, want %+v", field, diff[field], want)
		}
	}
	if c := diff["controller"]; c.Desired != "ctl-a" || c.Actual != "ctl-b" || c.Equal || !c.Known {
		t.Errorf("diff controller: %+v", c)
	}
	wantStatus := []string{apitypes.ObservationFetched, apitypes.ObservationFetched, apitypes.ObservationExpired, apitypes.ObservationInvalid}
	var got []string
	for _, o := range d.Observations {
		got = append(got, o.Status)
	}
	if !slices.Equal(got, wantStatus) {
		t.Fatalf("observations: %v, want %v: %+v", got, wantStatus, d.Observations)
	}
	if o := d.Observations[0]; o.EventID != "e3" || o.EventType != contract.TypeHeartbeat || o.Producer != "agent-n2" ||
		o.OccurredAt == nil || o.Summary != "controller_id=ctl-a node_id=n2" || o.Coordinate != coords[2] {
		t.Errorf("newest observation: %+v", o)
	}

	// Kafka unreachable: the page is served, the events show their
	// coordinates as unavailable.
	dead := testenv.KafkaClient(t, []string{"127.0.0.1:1"})
	hs := serveAPI(t, api.Options{DB: fx.db, Guard: testenv.LocalGuard(t), Events: api.NewKafkaEvents(dead, 300*time.Millisecond)})
	start := time.Now()
	d = decode[apitypes.NodeDetail](t, testenv.GetJSON(t, hs+"/v1/nodes/n2", 200))
	if time.Since(start) > 5*time.Second {
		t.Errorf("the page waited %v for a dead broker", time.Since(start))
	}
	if len(d.Observations) != 4 || d.Observations[0].Status != apitypes.ObservationUnavailable || d.Observations[0].Coordinate != coords[2] ||
		d.Observations[0].Offset != 2 || d.Lifecycle == nil {
		t.Errorf("observations with Kafka down: %+v", d.Observations)
	}
}

// serveAPI serves a query API of opts until the test ends and returns
// its URL.
func serveAPI(t *testing.T, opts api.Options) string {
	t.Helper()
	srv, err := api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Serve(t, srv)
}

// TestFleetFromJoiner reads, through the API, what the joiner writes of
// the fleet core: a node with fleet fields and heartbeats over a few
// minutes, the registry; the node page's recent events come from the
// topics by the coordinates the joiner kept.
func TestFleetFromJoiner(t *testing.T) {
	env := streamtest.NewEnv(t, 1)
	opts := joiner.Options{StageOptions: stream.StageOptions{Brokers: env.Brokers, Group: "fleet-joiner", Topics: env.Names,
		Logger: slog.New(slog.DiscardHandler)}, RoundOptions: stream.RoundOptions{FlushInterval: 50 * time.Millisecond}}
	stop := streamtest.Start(t, "joiner", func(ctx context.Context) (*joiner.Joiner, error) {
		return joiner.New(ctx, opts, sink.NewClickHouse(env.CH))
	})
	t.Cleanup(stop)
	base := serveAPI(t, api.Options{DB: env.CH, Topics: env.Names, Guard: testenv.LocalGuard(t), Events: api.NewKafkaEvents(env.Client, 5*time.Second)})

	const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	var seq uint64
	send := func(typ string, at time.Time, payload any) {
		t.Helper()
		seq++
		if err := env.Client.ProduceSync(context.Background(), streamtest.Event(t, env.Names, typ, "fleet", seq, at, payload)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	send(contract.TypeArtifact, t0, contract.Artifact{ArtifactID: "art-1", Version: "2.0", Digest: digest, SignedBy: "release-1", SBOMRef: "sbom://1"})
	send(contract.TypePolicyBundle, t0, contract.PolicyBundle{PolicyBundleID: "pb-1", TargetVersion: "2.0", ArtifactID: "art-1", Deadline: t0.Add(time.Hour)})
	send(contract.TypePlatformRecord, t0.Add(time.Second), contract.PlatformRecord{RecordType: "inventory_node", RecordID: "rec-n1",
		RecordVersion: 1, ResourceFamily: contract.FamilyGPUaaS, OwningDomain: "gpuaas", DomainID: "dom-1", Tags: []string{"site:ams"},
		Provider: contract.ProviderMAAS, ProviderID: "n1", ExpectedState: "allocated", NodeKind: "EDGE",
		Authority: contract.Authority{MasterOfRecord: "REGION", ControllerIDs: []string{"ctl-a"}},
		Desired:   contract.Desired{PolicyBundleID: "pb-1", TargetVersion: "2.0"}})
	for m := range 4 {
		send(contract.TypeHeartbeat, t0.Add(time.Duration(m)*time.Minute+10*time.Second), contract.Heartbeat{NodeID: "n1", AgentVersion: "1.0",
			HostFingerprint: "h-n1", Health: "OK", UpdatePath: "self_update", ReportedVersion: "1.9", ArtifactID: "art-1",
			ArtifactDigest: digest, ControllerID: "ctl-b", RelayID: "relay-1", SecondsBehind: int64(5 * (m + 1)), BacklogMessages: 10, UptimeS: 60})
	}

	var d apitypes.NodeDetail
	testenv.CheckFor(t, time.Minute, func() error {
		code, body, _ := getAs(t, base+"/v1/nodes/n1", testenv.LocalKey)
		if code != http.StatusOK {
			return fmt.Errorf("node page: %d", code)
		}
		d = decode[apitypes.NodeDetail](t, body)
		// The ring is written with the node's rows: as of its last row.
		if d.Lifecycle == nil || len(d.Lifecycle.Recent) == 0 || len(d.Observations) < 3 || d.Authority.State == "" || d.SupplyChain.Registry == nil {
			return fmt.Errorf("node page not yet written: %+v %+v %d observations", d.Lifecycle, d.SupplyChain, len(d.Observations))
		}
		if sd := decode[apitypes.SyncDebt](t, testenv.GetJSON(t, base+"/v1/syncdebt?relay_id=relay-1", 200)); sd.Points == 0 {
			return fmt.Errorf("no sync debt yet")
		}
		if ro := decode[apitypes.Rollouts](t, testenv.GetJSON(t, base+"/v1/rollouts", 200)); len(ro.Rollouts) == 0 {
			return fmt.Errorf("no rollout yet")
		}
		return nil
	})
	if d.Authority.State != "controller_not_listed" || d.Lifecycle.Phase != string(contract.PhaseQuarantined) || d.Lifecycle.Transitions == 0 ||
		len(d.Lifecycle.Recent) == 0 {
		t.Errorf("authority %+v, lifecycle %+v", d.Authority, d.Lifecycle)
	}
	if sc := d.SupplyChain; sc.State != "ok" || sc.Registry == nil || sc.Registry.Digest != digest || sc.Registry.SBOMRef != "sbom://1" {
		t.Errorf("supply chain: %+v", sc)
	}
	types := map[string]int{}
	for _, o := range d.Observations {
		if o.Status != apitypes.ObservationFetched {
			t.Errorf("observation %+v: want fetched", o)
		}
		types[o.EventType]++
	}
	if types[contract.TypeHeartbeat] < 2 || types[contract.TypePlatformRecord] != 1 || len(d.Observations) != len(d.Node.RecentEvents) {
		t.Errorf("observations by type %v, want heartbeats and the record, one per coordinate of %v", types, d.Node.RecentEvents)
	}
	if d.Observations[0].EventType != contract.TypeHeartbeat || !strings.Contains(d.Observations[0].Summary, "controller_id=ctl-b") ||
		d.Observations[0].Producer != "fleet" || d.Observations[0].OccurredAt == nil {
		t.Errorf("newest observation: %+v", d.Observations[0])
	}
	ro := decode[apitypes.Rollouts](t, testenv.GetJSON(t, base+"/v1/rollouts", 200))
	if len(ro.Rollouts) != 1 || ro.Rollouts[0].PolicyBundleID != "pb-1" || ro.Rollouts[0].Nodes != 1 {
		t.Errorf("rollouts: %+v", ro)
	}
	rl := decode[apitypes.Relays](t, testenv.GetJSON(t, base+"/v1/relays?tag=site:ams", 200))
	if len(rl.Domains) != 1 || rl.Domains[0].Relays[0].RelayID != "relay-1" || rl.Domains[0].Nodes != 1 {
		t.Errorf("relays: %+v", rl)
	}
	if tl := decode[apitypes.Timeline](t, testenv.GetJSON(t, base+"/v1/nodes/n1/timeline", 200)); tl.Count == 0 || tl.Transitions[0].ToPhase != d.Lifecycle.Phase {
		t.Errorf("timeline: %+v", tl)
	}
}
