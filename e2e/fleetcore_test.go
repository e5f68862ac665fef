package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
)

// TestFleetCoreMatchesGroundTruth feeds the default fleet with the fleet
// core and its bad input through the gateway to a joiner that is killed
// (SIGKILL) in the middle of the stream and restarted from its checkpoint,
// then checks the fleet core's tables against the generator's truth:
// node_agent_status's lifecycle, authority, supply chain and rollout per
// node, node_lifecycle_history's transitions of the scripted nodes,
// rollout_status's sums, the registry tables and the quarantined bad
// input. A second joiner replays the topics from the start into its own
// database; its transitions and counts must be the same rows.
func TestFleetCoreMatchesGroundTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	bin := buildCommands(t, ctx, stack.NameBroker, stack.NameIngest, stack.NameJoiner)
	s := startStack(t, ctx, stack.Options{
		Dir:        t.TempDir(),
		BinDir:     bin,
		Partitions: crashPartitions,
		Services:   []string{stack.NameIngest},
	})
	cfg := fleet.DefaultConfig()
	cfg.Seed = 42
	cfg.Core.BadInput = true
	gen, truth := newGenerator(t, cfg)

	js := &joinerSet{t: t, bin: filepath.Join(bin, "joiner"), env: append(os.Environ(), s.Env()...),
		dir: t.TempDir(), group: "fleetcore-joiner", db: s.ClickHouse().Database}
	t.Cleanup(js.stopAll)
	t.Cleanup(func() {
		if t.Failed() {
			js.dumpLogs()
		}
	})
	js.start()
	feedDone := feedPaced(ctx, s, gen, 400, 100*time.Millisecond)
	js.step(0, crashAction{after: 3 * time.Second, kind: "kill", target: 0})
	stats, err := feedDone()
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	gatewayRejections := 0
	for _, r := range truth.Fleet.Rejections {
		if r.Stage == "gateway" {
			gatewayRejections++
		}
	}
	if stats.Rejected != gatewayRejections || stats.Accepted+stats.Duplicate+stats.Rejected != stats.Events {
		t.Fatalf("feed stats %+v, truth rejects %d at the gateway", stats, gatewayRejections)
	}
	for _, r := range stats.RejectedReceipts {
		if !strings.Contains(string(r), string(contract.ReasonInvalidField)) || !strings.Contains(string(r), "node_kind") {
			t.Errorf("rejected receipt %s, want invalid_field on node_kind", r)
		}
	}
	waitGroupCaughtUp(t, s.BrokerAddr(), js.group, 2*time.Minute)
	js.checkAlive()
	js.stopAll()
	t.Logf("fed %d events, joiner killed and restarted, caught up at %v", stats.Events, time.Since(start).Round(time.Millisecond))

	conn := testenv.Open(t, s.ClickHouse())
	db := s.ClickHouse().Database
	checkFleetCore(t, ctx, conn, db, truth)
	checkQuarantined(t, ctx, s.BrokerAddr(), truth)

	// The replay: checkJoinerTables runs an uninterrupted joiner over the
	// same topics into database "reference" and compares drift_evidence,
	// node_agent_status and drift_history with it and the truth's findings.
	checkJoinerTables(t, ctx, s, js, truth, start)
	checkFleetCore(t, ctx, conn, "reference", truth)
	for _, table := range []struct {
		name string
		key  []string
		// skip are columns a replay may write otherwise: rollout_status
		// is written at a flush after its counts change, with the
		// watermark of that flush (as_of) and a version from it; when
		// the flushes fall depends on how the stream was batched.
		skip []string
	}{
		{"node_lifecycle_history", []string{"node_id", "seq"}, nil},
		{"rollout_status", []string{"policy_bundle_id", "domain_id", "partition"}, []string{"as_of", "version"}},
		{"fleet_artifacts", []string{"artifact_id"}, nil},
		{"policy_bundles", []string{"policy_bundle_id"}, nil},
	} {
		got := dropColumns(finalRows(t, ctx, conn, db, table.name, table.key), table.skip)
		want := dropColumns(finalRows(t, ctx, conn, "reference", table.name, table.key), table.skip)
		if d := diffRows(got, want); d != "" {
			t.Errorf("%s after a kill and restore differs from the replay (%d rows, reference %d):\n%s", table.name, len(got.rows), len(want.rows), d)
		} else {
			t.Logf("%s: %d rows identical to the replay", table.name, len(got.rows))
		}
	}
}

// checkFleetCore compares db's fleet-core tables with the truth.
func checkFleetCore(t *testing.T, ctx context.Context, conn driver.Conn, db string, truth *fleet.Truth) {
	t.Helper()
	ft := truth.Fleet
	// node_lifecycle_history.
	hist := map[string][]fleet.LifecycleRow{}
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT node_id, seq, to_phase, to_state, reason, at, correlation_id
		FROM %s.node_lifecycle_history FINAL ORDER BY node_id, seq`, db))
	if err != nil {
		t.Fatalf("read %s.node_lifecycle_history: %v", db, err)
	}
	for rows.Next() {
		var id string
		var r fleet.LifecycleRow
		var seq uint64
		if err := rows.Scan(&id, &seq, &r.Phase, &r.State, &r.Reason, &r.At, &r.CorrelationID); err != nil {
			t.Fatal(err)
		}
		r.Seq = int(seq)
		hist[id] = append(hist[id], r)
	}
	rows.Close()
	// node_agent_status, per node.
	rows, err = conn.Query(ctx, fmt.Sprintf(`SELECT node_id, domain_id, phase, state, authority, supply_chain, rollout,
		policy_bundle_id, target_version, reported_version, controller_id, relay_id, artifact_id
		FROM %s.node_agent_status FINAL`, db))
	if err != nil {
		t.Fatalf("read %s.node_agent_status: %v", db, err)
	}
	got := map[string]fleet.CoreNode{}
	for rows.Next() {
		var n fleet.CoreNode
		if err := rows.Scan(&n.NodeID, &n.DomainID, &n.Phase, &n.State, &n.Authority, &n.SupplyChain, &n.Rollout,
			&n.PolicyBundleID, &n.TargetVersion, &n.ReportedVersion, &n.ControllerID, &n.RelayID, &n.ArtifactID); err != nil {
			t.Fatal(err)
		}
		got[n.NodeID] = n
	}
	rows.Close()
	bad, phases := 0, map[string]int{}
	for _, want := range ft.Nodes {
		g, ok := got[want.NodeID]
		w := want
		w.Role, w.Transitions, w.TransitionsFrom = "", nil, time.Time{}
		if !ok && w.ArtifactID == "" && len(hist[w.NodeID]) > 0 {
			// A node that never heartbeat (its record alone decides its
			// phase) may have no status row: its last transition says.
			last := hist[w.NodeID][len(hist[w.NodeID])-1]
			g, ok = w, last.Phase == w.Phase && last.State == w.State
		}
		if !ok || !reflect.DeepEqual(g, w) {
			if bad++; bad <= 20 {
				t.Errorf("%s: node %s (%s):\n got  %+v\n want %+v", db, want.NodeID, want.Role, g, w)
			}
		}
		phases[g.Phase]++
	}
	if bad == 0 {
		t.Logf("%s: node_agent_status of %d nodes matches the truth (phases %v)", db, len(ft.Nodes), phases)
	}

	scripted := 0
	for _, n := range ft.Nodes {
		if n.Transitions == nil {
			continue
		}
		scripted++
		// The table keeps seconds: compare the truth's times truncated.
		n.TransitionsFrom = n.TransitionsFrom.Truncate(time.Second)
		n.Transitions = slices.Clone(n.Transitions)
		for i := range n.Transitions {
			n.Transitions[i].At = n.Transitions[i].At.Truncate(time.Second)
		}
		for i, r := range hist[n.NodeID] {
			if r.Seq != i+1 {
				t.Errorf("%s: node %s: seq %d at position %d", db, n.NodeID, r.Seq, i+1)
			}
		}
		if err := fleet.MatchTransitions(n, hist[n.NodeID]); err != nil {
			t.Errorf("%s: node %s (%s): %v", db, n.NodeID, n.Role, err)
		}
	}
	t.Logf("%s: checked the transitions of %d scripted nodes", db, scripted)

	// rollout_status, summed over partitions.
	rows, err = conn.Query(ctx, fmt.Sprintf(`SELECT policy_bundle_id, domain_id, any(target_version),
		sum(at_target), sum(updating), sum(behind), sum(failed), sum(pending)
		FROM %s.rollout_status FINAL GROUP BY policy_bundle_id, domain_id`, db))
	if err != nil {
		t.Fatalf("read %s.rollout_status: %v", db, err)
	}
	var rollouts []fleet.RolloutCount
	for rows.Next() {
		var rc fleet.RolloutCount
		var at, up, be, fa, pe uint64
		if err := rows.Scan(&rc.PolicyBundleID, &rc.DomainID, &rc.TargetVersion, &at, &up, &be, &fa, &pe); err != nil {
			t.Fatal(err)
		}
		rc.AtTarget, rc.Updating, rc.Behind, rc.Failed, rc.Pending = int(at), int(up), int(be), int(fa), int(pe)
		if at+up+be+fa+pe > 0 {
			rollouts = append(rollouts, rc)
		}
	}
	rows.Close()
	slices.SortFunc(rollouts, func(a, b fleet.RolloutCount) int {
		return strings.Compare(a.PolicyBundleID+"/"+a.DomainID, b.PolicyBundleID+"/"+b.DomainID)
	})
	if !slices.Equal(rollouts, ft.Rollouts) {
		t.Errorf("%s: rollout_status sums\n got  %+v\n want %+v", db, rollouts, ft.Rollouts)
	}

	// Sync debt: the last minute written (the minute before the final
	// watermark's) counts every node that heartbeat within the staleness
	// window and is not RETIRED, with its final values.
	rows, err = conn.Query(ctx, fmt.Sprintf(`SELECT domain_id, relay_id, sum(nodes), max(max_seconds_behind), sum(backlog_messages)
		FROM %s.sync_debt_minute FINAL WHERE minute = (SELECT max(minute) FROM %s.sync_debt_minute)
		GROUP BY domain_id, relay_id ORDER BY domain_id, relay_id`, db, db))
	if err != nil {
		t.Fatalf("read %s.sync_debt_minute: %v", db, err)
	}
	var relays []fleet.RelayDebt
	for rows.Next() {
		var r fleet.RelayDebt
		var n uint64
		if err := rows.Scan(&r.DomainID, &r.RelayID, &n, &r.MaxSecondsBehind, &r.BacklogMessages); err != nil {
			t.Fatal(err)
		}
		r.Nodes = int(n)
		relays = append(relays, r)
	}
	rows.Close()
	wantRelays := slices.Clone(ft.Relays)
	for i := range wantRelays {
		if w := &wantRelays[i]; w.Moving && i < len(relays) && relays[i].DomainID == w.DomainID && relays[i].RelayID == w.RelayID {
			w.MaxSecondsBehind, w.BacklogMessages, w.Moving = relays[i].MaxSecondsBehind, relays[i].BacklogMessages, false
		}
	}
	if !slices.Equal(relays, wantRelays) {
		t.Errorf("%s: sync_debt_minute's last minute\n got  %+v\n want %+v", db, relays, wantRelays)
	}

	// The registry.
	rows, err = conn.Query(ctx, fmt.Sprintf(`SELECT artifact_id, artifact_version, digest, revoked FROM %s.fleet_artifacts FINAL ORDER BY artifact_id`, db))
	if err != nil {
		t.Fatalf("read %s.fleet_artifacts: %v", db, err)
	}
	gotArt := map[string]string{}
	for rows.Next() {
		var id, v, d string
		var rev uint8
		if err := rows.Scan(&id, &v, &d, &rev); err != nil {
			t.Fatal(err)
		}
		gotArt[id] = fmt.Sprintf("%s %s %d", v, d, rev)
	}
	rows.Close()
	wantArt := map[string]string{}
	for _, a := range ft.Artifacts {
		rev := 0
		if a.Revoked {
			rev = 1
		}
		wantArt[a.ArtifactID] = fmt.Sprintf("%s %s %d", a.Version, a.Digest, rev)
	}
	if fmt.Sprint(gotArt) != fmt.Sprint(wantArt) {
		t.Errorf("%s: fleet_artifacts %v, want %v", db, gotArt, wantArt)
	}
	var bundles []string
	rows, err = conn.Query(ctx, fmt.Sprintf(`SELECT policy_bundle_id, target_version, artifact_id, domains, deadline FROM %s.policy_bundles FINAL ORDER BY policy_bundle_id`, db))
	if err != nil {
		t.Fatalf("read %s.policy_bundles: %v", db, err)
	}
	for rows.Next() {
		var id, tv, art string
		var doms []string
		var dl time.Time
		if err := rows.Scan(&id, &tv, &art, &doms, &dl); err != nil {
			t.Fatal(err)
		}
		bundles = append(bundles, fmt.Sprint(id, tv, art, doms, dl.UTC().Format(time.RFC3339)))
	}
	rows.Close()
	var wantBundles []string
	for _, b := range ft.Bundles {
		wantBundles = append(wantBundles, fmt.Sprint(b.PolicyBundleID, b.TargetVersion, b.ArtifactID, append([]string{}, b.Domains...), b.Deadline.UTC().Format(time.RFC3339)))
	}
	slices.Sort(wantBundles) // by policy_bundle_id, as read
	if !slices.Equal(bundles, wantBundles) {
		t.Errorf("%s: policy_bundles %v, want %v", db, bundles, wantBundles)
	}
}

// checkQuarantined checks that the joiner quarantined each of the truth's
// joiner-stage rejections exactly once, with its reason.
func checkQuarantined(t *testing.T, ctx context.Context, broker string, truth *fleet.Truth) {
	t.Helper()
	want := map[string]int{}
	for _, r := range truth.Fleet.Rejections {
		if r.Stage == "joiner" {
			want[r.Reason]++
		}
	}
	names := contract.DefaultTopics()
	got := map[string]int{}
	for _, r := range testenv.ReadTopics(t, ctx, []string{broker}, 2*time.Second, names.Quarantine)[names.Quarantine] {
		var q contract.Quarantined
		if err := json.Unmarshal(r.Value, &q); err != nil {
			t.Errorf("quarantine record %s/%d@%d: %v", names.Quarantine, r.Partition, r.Offset, err)
			continue
		}
		if slices.Contains(contract.RegistryReasons, q.Reason) {
			got[string(q.Reason)]++
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("quarantined registry rejections %v, want %v", got, want)
	} else {
		t.Logf("quarantine: registry rejections %v as the truth says", got)
	}
}

// dropColumns removes the named columns from every row of tr.
func dropColumns(tr tableRows, names []string) tableRows {
	if len(names) == 0 {
		return tr
	}
	var keep []int
	var cols []string
	for i, c := range tr.columns {
		if !slices.Contains(names, c) {
			keep = append(keep, i)
			cols = append(cols, c)
		}
	}
	out := tableRows{columns: cols, rows: map[string][]string{}}
	for k, row := range tr.rows {
		var r []string
		for _, i := range keep {
			if i < len(row) {
				r = append(r, row[i])
			}
		}
		out.rows[k] = r
	}
	return out
}
