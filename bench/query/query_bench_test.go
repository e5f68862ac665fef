// Package query_test measures the query API's read latency over a large
// read model, from an HTTP client: heat map, status, attention top 100 and
// one drift list page. Findings are generated inside ClickHouse (INSERT
// ... SELECT FROM numbers), so ten million load in about a minute. See
// README.md for the command and the figures measured.
package query_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// EnvFindings sets how many findings the benchmark loads (default
// 200000); EnvNodes how many node_agent_status rows (default findings/10).
// EnvUnmerged set to 1 writes, after the merge, a second version of about
// half the findings and nodes, scored a tenth of the first: a table whose
// superseded rows are not merged away yet and rank ahead of the current
// ones.
const (
	EnvFindings = "DRIFTLINE_BENCH_FINDINGS"
	EnvNodes    = "DRIFTLINE_BENCH_NODES"
	EnvUnmerged = "DRIFTLINE_BENCH_UNMERGED"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

var fixture struct {
	once  sync.Once
	url   string
	err   error
	close func()
}

// load fills a fresh database: findings over 40 domains, every
// classification, a third of them resolved, scores spread so the ranking
// queries have work, each with one of 100 tags; and nodes over the same
// domains.
func load(ctx context.Context, db driver.Conn, findings, nodes int) error {
	stmts := []string{fmt.Sprintf(`INSERT INTO drift_evidence (evidence_id, correlation_id, resource_family, product_id,
	owning_domain, domain_id, record_type, record_id, expected_state, provider, provider_id, observed_state, observed_at,
	classification, severity, status, first_seen_at, last_seen_at, retry_count, posture, attention_score, tags, version, updated_at)
	SELECT concat(arrayElement(['orphan_provider_resource','missing_provider_resource','stale_lifecycle_state','identity_mismatch','quota_or_capacity_mismatch','route_or_dns_mismatch'], toUInt32(number %% 6) + 1), ':maas/n', toString(number)),
		concat('c-', toString(number %% 100000)), 'gpuaas_allocation', concat('p', toString(number %% 7)),
		concat('domain-', toString(number %% 40)), concat('d-', toString(number %% 40)), 'node', concat('r', toString(number)),
		'running', 'maas', concat('n', toString(number)), 'starting', toDateTime(1795000000 + number %% 86400),
		arrayElement(['orphan_provider_resource','missing_provider_resource','stale_lifecycle_state','identity_mismatch','quota_or_capacity_mismatch','route_or_dns_mismatch'], toUInt32(number %% 6) + 1),
		if(number %% 6 IN (1, 3, 4, 5), 'critical', 'warning'), if(number %% 3 = 0, 'resolved', 'open'),
		toDateTime(1795000000 + number %% 86400), toDateTime(1795000000 + number %% 86400), toUInt32(number %% 4),
		if(number %% 6 IN (1, 4), 'block_admission', 'quarantine'), toFloat64((number * 7919) %% 1000000) / 1000,
		[concat('t', toString(number %% 100))], 1, now()
	FROM numbers(%d)`, findings),
		fmt.Sprintf(`INSERT INTO node_agent_status (node_id, domain_id, owning_domain, node_agent_state, gate, connectivity_mode,
	health, expected_agent_version, observed_agent_version, last_seen_at, attention_score, version)
	SELECT concat('n', toString(number)), concat('d-', toString(number %% 40)), concat('domain-', toString(number %% 40)),
		arrayElement(['healthy','stale','recovering'], toUInt32(number %% 3) + 1),
		arrayElement(['pass','warning','retry','investigate','block_production'], toUInt32(number %% 5) + 1),
		arrayElement(['LIVE','DELAYED','EDGE_CACHED','AUTONOMOUS','DISCONNECTED','RETURNING','REPLAYING'], toUInt32(number %% 7) + 1),
		'OK', '1.4.2', '1.4.2', toDateTime(1795000000 + number %% 3600), toFloat64((number * 104729) %% 1000000) / 1000, 1
	FROM numbers(%d)`, nodes),
		`INSERT INTO consumer_progress (consumer, partition, watermark, events, findings_open, updated_at, version)
	SELECT 'driftline-joiner', toUInt32(number), toDateTime(1795086400), 1000, 10, now(), 1 FROM numbers(` + strconv.Itoa(benchPartitions) + `)`,
	}
	for _, s := range stmts {
		if err := db.Exec(ctx, s); err != nil {
			return err
		}
	}
	// Merged parts are what a long-running read model looks like; FINAL
	// over one part per partition is also its cheapest case.
	for _, tbl := range []string{"drift_evidence", "node_agent_status"} {
		if err := db.Exec(ctx, "OPTIMIZE TABLE "+tbl+" FINAL"); err != nil {
			return err
		}
	}
	if os.Getenv(EnvUnmerged) != "1" {
		return nil
	}
	const findingCols = `evidence_id, correlation_id, resource_family, product_id, owning_domain, domain_id, record_type,
	record_id, expected_state, provider, provider_id, observed_state, observed_at, classification, severity, status,
	first_seen_at, last_seen_at, retry_count, posture, attention_score, version, updated_at`
	const nodeCols = `node_id, domain_id, owning_domain, node_agent_state, gate, connectivity_mode, health,
	expected_agent_version, observed_agent_version, last_seen_at, attention_score, version`
	for _, s := range []string{
		`INSERT INTO drift_evidence (` + findingCols + `) SELECT evidence_id, correlation_id, resource_family, product_id,
	owning_domain, domain_id, record_type, record_id, expected_state, provider, provider_id, observed_state, observed_at,
	classification, severity, status, first_seen_at, last_seen_at + 86400, retry_count + 1, posture, attention_score / 10, 2, now()
	FROM drift_evidence WHERE cityHash64(evidence_id) % 2 = 0`,
		`INSERT INTO node_agent_status (` + nodeCols + `) SELECT node_id, domain_id, owning_domain, node_agent_state, gate,
	connectivity_mode, health, expected_agent_version, observed_agent_version, last_seen_at + 3600, attention_score / 10, 2
	FROM node_agent_status WHERE cityHash64(node_id) % 2 = 0`,
	} {
		if err := db.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// benchPartitions is the joiner partition count the summaries are spread
// over.
const benchPartitions = 12

func server(b *testing.B) string {
	fixture.once.Do(func() {
		findings := envInt(EnvFindings, 200000)
		nodes := envInt(EnvNodes, max(1, findings/10))
		ctx := context.Background()
		db, err := readmodel.Open(ctx, testenv.ClickHouse(b), readmodel.ReadTimeout(10*time.Minute))
		if err != nil {
			fixture.err = err
			return
		}
		start := time.Now()
		if fixture.err = load(ctx, db, findings, nodes); fixture.err != nil {
			return
		}
		loaded := time.Now()
		// The marks are kept by a materialized view during the load; the
		// counts and attention tops are what the joiner
		// would hold for these findings.
		if fixture.err = sink.RebuildSummaries(ctx, db, benchPartitions); fixture.err != nil {
			return
		}
		b.Logf("loaded %d findings and %d nodes in %v, summaries rebuilt in %v", findings, nodes,
			loaded.Sub(start).Round(time.Millisecond), time.Since(loaded).Round(time.Millisecond))
		srv, err := api.New(api.Options{Guard: testenv.LocalGuard(b), DB: db, QueryTimeout: time.Minute})
		if err != nil {
			fixture.err = err
			return
		}
		hs := httptest.NewServer(srv.Handler())
		fixture.url = hs.URL
		fixture.close = func() {
			http.DefaultClient.CloseIdleConnections()
			hs.Close()
			srv.Close()
			db.Close()
		}
	})
	if fixture.err != nil {
		b.Fatal(fixture.err)
	}
	return fixture.url
}

// BenchmarkEndpoints measures each endpoint from an HTTP client and reports
// p50 and p99 latencies besides ns/op.
func BenchmarkEndpoints(b *testing.B) {
	u := server(b)
	b.Cleanup(func() {
		if fixture.close != nil {
			fixture.close()
		}
	})
	for _, ep := range []struct{ name, path string }{
		{"heatmap", "/v1/heatmap"},
		{"heatmap_tag", "/v1/heatmap?tag=t7"},
		{"status", "/v1/status"},
		{"attention_top100", "/v1/attention?n=100"},
		{"attention_top100_findings", "/v1/attention?n=100&kind=finding"},
		{"attention_top100_nodes", "/v1/attention?n=100&kind=node"},
		{"attention_top100_per_domain", "/v1/attention?n=100&by=domain&kind=finding"},
		{"drift_page", "/v1/drift?limit=100"},
		{"drift_page_critical_domain", "/v1/drift?limit=100&severity=critical&owning_domain=domain-7"},
		{"attention_top100_critical", "/v1/attention?n=100&kind=finding&severity=critical"},
		{"drift_page_by_score", "/v1/drift?limit=100&sort=attention_score"},
		{"drift_page_by_first_seen", "/v1/drift?limit=100&sort=first_seen_at"},
		{"connectivity", "/v1/connectivity"},
		{"nodes_page", "/v1/nodes?limit=100&gate=block_production"},
		{"nodes_page_all", "/v1/nodes?limit=100"},
		{"nodes_page_by_score", "/v1/nodes?limit=100&sort=attention_score"},
		{"node_detail", "/v1/nodes/n12345"},
		{"bundle_by_correlation", "/v1/bundle?correlation_id=c-12345"},
		// Exports of about 12,000 and 111,000 findings at 10M.
		{"export_small", "/v1/drift?owning_domain=domain-7&product=p3&classification=identity_mismatch&status=all&format=csv"},
		{"export_medium", "/v1/drift?owning_domain=domain-7&severity=critical&format=csv"},
		// The web UI's domain view: both of its lists.
		{"ui_domain_drift", "/v1/drift?owning_domain=domain-7&limit=200&sort=attention_score"},
		{"ui_domain_nodes", "/v1/nodes?owning_domain=domain-7&limit=200&sort=attention_score"},
	} {
		b.Run(ep.name, func(b *testing.B) {
			get := func() time.Duration {
				start := time.Now()
				resp, err := testenv.Do(u+ep.path, testenv.LocalKey)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", ep.path, resp.StatusCode)
				}
				return time.Since(start)
			}
			// The endpoint's first request is reported on its own: it
			// opens the connections its concurrent queries need and
			// reads parts no query read yet, several times the steady
			// latency the percentiles are of.
			first := get()
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, get())
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
		})
	}
}
