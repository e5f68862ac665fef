package sink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// readModel connects to a new database of the test ClickHouse holding the
// read model; the connection is closed when tb ends.
func readModel(tb testing.TB) driver.Conn {
	tb.Helper()
	conn, cfg := testenv.ClickHouseConn(tb)
	if err := readmodel.Migrate(context.Background(), conn, cfg.Database); err != nil {
		tb.Fatal(err)
	}
	return conn
}

// TestWriteRoundTrip writes findings, transitions and node statuses and
// reads every column back: each value lands in its column, whichever way
// Write hands it to the driver, and whichever batch of a write it is in.
func TestWriteRoundTrip(t *testing.T) {
	ctx := context.Background()
	conn := readModel(t)
	b := benchBatch(3)
	current, history, nodes := b.Current.All(), b.History.All(), b.Nodes.All()
	current[1].ResolvedAt = time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC)
	resolved := current[2]
	resolved.Transition, resolved.ResolvedAt = contract.TransitionResolved, time.Date(2026, 11, 21, 10, 7, 0, 0, time.UTC)
	history[2] = TransitionOf(&resolved)
	n2 := &nodes[2]
	n2.ReplayRequired, n2.BacklogMessages, n2.SecondsBehind, n2.LossPct = true, 1234, 56, 2.5
	c := NewClickHouse(conn)
	c.now = func() time.Time { return time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC) }
	// Written as two batches (a joiner writes its partitions' outputs
	// together): each table gets the rows of both, in order.
	first := &Batch{Current: PackedOf(current[:2]...), History: PackedOf(history[:1]...), Nodes: PackedOf(nodes[:2]...)}
	second := &Batch{Current: PackedOf(current[2:]...), History: PackedOf(history[1:]...), Nodes: PackedOf(nodes[2:]...)}
	if err := c.Write(ctx, first, second); err != nil {
		t.Fatal(err)
	}
	rows := func(q string) []string {
		t.Helper()
		return testenv.Strings(t, conn, q)
	}
	check := func(table string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", table, got, want)
		}
	}
	// resolved_at as Unix seconds: a zero time is stored as the epoch,
	// which servers print differently.
	const at = "2026-11-21 10:00:00"
	var want []string
	for _, f := range current {
		resolved := readmodel.Epoch(f.ResolvedAt).Unix()
		want = append(want, fmt.Sprintf("%s|%s|gpu|%s|%s|pkg-standard|%s|allocation|%s|running|%s|maas|%s|stopped|v1|%s|%s|warning|open|2026-11-21 09:00:00|%s|%d|%d|retry|2026-11-21 10:01:00|rb/stale-lifecycle-state|%d|%d|2026-11-21 11:00:00",
			f.EvidenceID, f.CorrelationID, f.ProductID, f.OwningDomain, f.DomainID, f.RecordID, f.ExpectedVersion, f.ProviderID,
			at, f.Class, at, resolved, f.RetryCount, int(f.AttentionScore), f.Version))
	}
	check("drift_evidence", rows(`SELECT concat(evidence_id, '|', correlation_id, '|', toString(resource_family), '|', toString(product_id), '|',
 toString(owning_domain), '|', toString(owning_package), '|', toString(domain_id), '|', toString(record_type), '|', record_id, '|',
 toString(expected_state), '|', expected_version, '|', toString(provider), '|', provider_id, '|', toString(observed_state), '|',
 observed_version, '|', toString(observed_at), '|', toString(classification), '|', toString(severity), '|', toString(status), '|',
 toString(first_seen_at), '|', toString(last_seen_at), '|', toString(toUnixTimestamp(resolved_at)), '|', toString(retry_count), '|', toString(posture), '|',
 toString(next_attempt_at), '|', runbook, '|', toString(attention_score), '|', toString(version), '|', toString(updated_at))
 FROM drift_evidence ORDER BY version`), want)

	want = want[:0]
	for i, f := range history {
		tr, when := "opened", at
		if i == 2 {
			tr, when = "resolved", "2026-11-21 10:07:00"
		}
		want = append(want, fmt.Sprintf("%s|%d|%s|%s|warning|open|retry|running|stopped|v1|%d|%s|%s",
			f.EvidenceID, f.Version, tr, f.Class, f.RetryCount, when, f.CorrelationID))
	}
	check("drift_history", rows(`SELECT concat(evidence_id, '|', toString(version), '|', toString(transition), '|', toString(classification), '|',
 toString(severity), '|', toString(status), '|', toString(posture), '|', toString(expected_state), '|', toString(observed_state), '|',
 observed_version, '|', toString(retry_count), '|', toString(at), '|', correlation_id) FROM drift_history ORDER BY version`), want)

	want = want[:0]
	for i, n := range nodes {
		replay := 0
		if i == 2 {
			replay = 1
		}
		want = append(want, fmt.Sprintf("%s|%s|%s|healthy|ok|managed|1.4.2|1.4.2|sha256:ab12|sha256:cd34|%s|ok|none|ok|open|direct|12|%g|0|%d|%d|%d|%s|0|%d|2026-11-21 11:00:00",
			n.NodeID, n.DomainID, n.OwningDomain, n.HostFingerprint, n.LossPct, n.BacklogMessages, n.SecondsBehind, replay, at, n.Version))
	}
	check("node_agent_status", rows(`SELECT concat(node_id, '|', toString(domain_id), '|', toString(owning_domain), '|', toString(node_agent_state), '|',
 toString(node_agent_reason), '|', toString(update_path), '|', expected_agent_version, '|', observed_agent_version, '|',
 cert_issuer_fingerprint, '|', ingress_trust_fingerprint, '|', host_fingerprint, '|', toString(terminal_stream_probe), '|',
 toString(workload_impact), '|', toString(health), '|', toString(gate), '|', toString(connectivity_mode), '|', toString(rtt_ms), '|',
 toString(loss_pct), '|', toString(bandwidth_kbps), '|', toString(backlog_messages), '|', toString(seconds_behind), '|',
 toString(replay_required), '|', toString(last_seen_at), '|', toString(attention_score), '|', toString(version), '|', toString(updated_at))
 FROM node_agent_status ORDER BY version`), want)
}
