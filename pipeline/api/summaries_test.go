package api_test

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// bulkFindings inserts n findings over five domains inside ClickHouse, a
// third of them resolved in a second version, as separate parts.
func bulkFindings(t *testing.T, fx *fixture, n int) {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range []string{
		`INSERT INTO drift_evidence (evidence_id, owning_domain, classification, severity, status, posture,
		first_seen_at, last_seen_at, attention_score, version)
		SELECT concat('bulk:maas/n', toString(number)), concat('bulk-', toString(number % 5)),
			'identity_mismatch', 'critical', 'open', 'quarantine', now(), now(), toFloat64(1500 + number % 11), 1
		FROM numbers(` + itoa(n) + `)`,
		`INSERT INTO drift_evidence (evidence_id, owning_domain, classification, severity, status, posture,
		first_seen_at, last_seen_at, attention_score, version)
		SELECT concat('bulk:maas/n', toString(number)), concat('bulk-', toString(number % 5)),
			'identity_mismatch', 'critical', 'resolved', 'quarantine', now(), now(), 0, 2
		FROM numbers(` + itoa(n) + `) WHERE number % 3 = 0`,
	} {
		if err := fx.db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.RebuildSummaries(ctx, fx.db, 4); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDriftPagesAcrossMarks pages through more findings than the sampled
// marks span, with and without filters, and checks that the pages equal
// the whole selection read in one export.
func TestDriftPagesAcrossMarks(t *testing.T) {
	fx := newFixture(t, api.Options{})
	bulkFindings(t, fx, 60000)
	ctx := context.Background()
	for _, q := range []url.Values{
		{"limit": {"997"}},
		{"limit": {"250"}, "owning_domain": {"bulk-3"}},
		{"limit": {"100"}, "status": {"all"}, "classification": {"identity_mismatch"}},
		{"limit": {"2"}, "domain_id": {"d-us1"}, "status": {"all"}}, // rare: three seeded rows
	} {
		paged, err := fx.client.DriftAll(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		all := url.Values{}
		for k, v := range q {
			if k != "limit" {
				all[k] = v
			}
		}
		all.Set("limit", "10000")
		want, err := fx.client.DriftAll(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		if len(paged) == 0 || !slices.Equal(ids(paged), ids(want)) || !slices.IsSorted(ids(paged)) {
			t.Errorf("%v: %d paged findings differ from %d in pages of 10000", q, len(paged), len(want))
		}
	}
}

// TestAttentionFromSummaryMatchesScan checks the attention queue read from
// attention_top against the same queue scanned from drift_evidence (a
// filter that selects every finding forces the scan).
func TestAttentionFromSummaryMatchesScan(t *testing.T) {
	fx := newFixture(t, api.Options{})
	bulkFindings(t, fx, 30000)
	every := "orphan_provider_resource,missing_provider_resource,stale_lifecycle_state,identity_mismatch,quota_or_capacity_mismatch,route_or_dns_mismatch"
	sameAttention(t, fx, url.Values{"classification": {every}},
		url.Values{"n": {"100"}, "kind": {"finding"}},
		url.Values{"n": {"37"}, "kind": {"finding"}, "by": {"domain"}},
		url.Values{"n": {"20"}, "kind": {"finding"}, "owning_domain": {"bulk-1,d-eu1"}},
	)
}

// sameAttention checks that each query reads the same attention queue,
// not empty, as the query with the filter that forces a scan added.
func sameAttention(t *testing.T, fx *fixture, scan url.Values, queries ...url.Values) {
	t.Helper()
	ctx := context.Background()
	for _, q := range queries {
		fast, err := fx.client.Attention(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		sq := maps.Clone(scan)
		maps.Copy(sq, q)
		slow, err := fx.client.Attention(ctx, sq)
		if err != nil {
			t.Fatal(err)
		}
		fastIDs, slowIDs := attentionIDs(fast), attentionIDs(slow)
		if len(fastIDs) == 0 || !slices.Equal(fastIDs, slowIDs) {
			t.Errorf("%v: from the summaries %v\nscanned %v", q, fastIDs, slowIDs)
		}
	}
}

// TestNodeAttentionFromSummaryMatchesScan checks the nodes of the
// attention queue read from attention_top_nodes against the same queue
// ranked from node_agent_status (a gate filter that selects every gate
// but pass forces the ranking): over several parts, with a second
// version that makes a fifth of the nodes pass and moves another fifth
// to a new score and domain.
func TestNodeAttentionFromSummaryMatchesScan(t *testing.T) {
	fx := newFixture(t, api.Options{})
	ctx := context.Background()
	const n = 20000
	for _, stmt := range []string{
		`INSERT INTO node_agent_status (node_id, domain_id, owning_domain, gate, attention_score, version)
		SELECT concat('bulk-n', toString(number)), 'd-bulk', concat('bulk-', toString(number % 5)),
			arrayElement(['pass', 'warning', 'retry', 'investigate', 'block_production'], toUInt32(number % 5) + 1),
			toFloat64((number * 7919) % 997), 1
		FROM numbers(` + itoa(n) + `)`,
		`INSERT INTO node_agent_status (node_id, domain_id, owning_domain, gate, attention_score, version)
		SELECT concat('bulk-n', toString(number)), 'd-bulk', concat('bulk-', toString(number % 7)),
			if(number % 10 < 2, 'pass', 'block_production'), toFloat64(1000 + number % 13), 2
		FROM numbers(` + itoa(n) + `) WHERE number % 10 < 4`,
	} {
		if err := fx.db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.RebuildSummaries(ctx, fx.db, 4); err != nil {
		t.Fatal(err)
	}
	sameAttention(t, fx, url.Values{"gate": {"warning,retry,investigate,block_production"}},
		url.Values{"n": {"100"}, "kind": {"node"}},
		url.Values{"n": {"37"}, "kind": {"node"}, "by": {"domain"}},
		url.Values{"n": {"20"}, "kind": {"node"}, "owning_domain": {"bulk-1,bulk-6"}},
		// Findings and nodes: the 4,000 nodes scored 1000 and more
		// outrank the fixture's findings.
		url.Values{"n": {"100"}},
	)
}

func attentionIDs(a *apitypes.Attention) []string {
	var out []string
	for _, it := range a.Global {
		out = append(out, it.ID)
	}
	for _, d := range a.Domains {
		out = append(out, "domain "+d.OwningDomain)
		for _, it := range d.Items {
			out = append(out, it.ID)
		}
	}
	return out
}
