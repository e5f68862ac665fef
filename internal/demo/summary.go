package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// billingCounts counts open billing mismatches by kind straight from the
// read model (CONTRACT section 6).
func billingCounts(ctx context.Context, st stack.State) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := readmodel.Open(ctx, service.ClickHouse{
		Addr:     st.ClickHouse,
		Database: st.Database,
		User:     service.Env("DRIFTLINE_CLICKHOUSE_USER", "default"),
		Password: service.Env("DRIFTLINE_CLICKHOUSE_PASSWORD", ""),
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rows, err := conn.Query(ctx, "SELECT kind, count() FROM billing_mismatch FINAL WHERE status = 'open' GROUP BY kind")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var kind string
		var n uint64
		if err := rows.Scan(&kind, &n); err != nil {
			return nil, err
		}
		out[kind] = n
	}
	return out, rows.Err()
}

// expectedOpen counts the fleet's ground-truth open findings by
// classification, to show beside what the pipeline found.
func expectedOpen(t *fleet.Truth) map[string]uint64 {
	m := map[string]uint64{}
	for _, f := range t.Findings {
		if f.Status == "open" {
			m[f.Classification]++
		}
	}
	return m
}

func printSummary(out io.Writer, st stack.State, status *api.Status, expected, billing, expBilling map[string]uint64, berr error, apiKey string) {
	f := status.Findings
	fmt.Fprintln(out, "\n=== summary ===")
	fmt.Fprintf(out, "open drift findings: %d (critical %d, blocking admission %d), resolved: %d\n",
		f.Open, f.CriticalOpen, f.BlockedAdmissions, f.Resolved)
	fmt.Fprintf(out, "  %-28s %6s %10s\n", "classification", "open", "fleet truth")
	keys := map[string]bool{}
	for k, n := range f.OpenByClassification {
		keys[k] = n > 0
	}
	for k := range expected {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if keys[k] {
			fmt.Fprintf(out, "  %-28s %6d %10d\n", k, f.OpenByClassification[k], expected[k])
		}
	}
	if berr != nil {
		fmt.Fprintf(out, "billing mismatches: unknown (%v)\n", berr)
	} else {
		var total uint64
		for _, n := range billing {
			total += n
		}
		fmt.Fprintf(out, "open billing mismatches: %d\n", total)
		fmt.Fprintf(out, "  %-28s %6s %10s\n", "kind", "open", "fleet truth")
		keys := map[string]bool{}
		for k := range billing {
			keys[k] = true
		}
		for k := range expBilling {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			fmt.Fprintf(out, "  %-28s %6d %10d\n", k, billing[k], expBilling[k])
		}
		fmt.Fprintln(out, "  (raised by the billing reconciler in the rater; docs/billing-model.md)")
	}

	q := st.Query
	fmt.Fprintf(out, "\nweb UI: %s/ui/\n", q)
	fmt.Fprintln(out, "query API:", q)
	fmt.Fprintf(out, "  curl -s %s/v1/status\n", q)
	fmt.Fprintf(out, "  curl -s '%s/v1/drift?severity=critical&limit=20'\n", q)
	fmt.Fprintf(out, "  curl -s '%s/v1/drift?classification=identity_mismatch'\n", q)
	fmt.Fprintf(out, "  curl -s %s/v1/heatmap\n", q)
	fmt.Fprintf(out, "  curl -s '%s/v1/billing/mismatches?status=open'\n", q)
	fmt.Fprintf(out, "  curl -s %s/metrics\n", q)
	fmt.Fprintln(out, "ingest gateway:", st.Ingest)
	fmt.Fprintf(out, "  curl -s -H 'Authorization: Bearer %s' --data-binary @events.ndjson %s/v1/events\n", apiKey, st.Ingest)
	host, port := splitHostPort(st.ClickHouse)
	fmt.Fprintln(out, "ClickHouse:")
	fmt.Fprintf(out, "  clickhouse-client --host %s --port %s --database %s\n", host, port, st.Database)
	fmt.Fprintf(out, "  (e.g. SELECT classification, count() FROM drift_evidence FINAL WHERE status = 'open' GROUP BY classification)\n")
	fmt.Fprintf(out, "  (e.g. SELECT kind, count() FROM billing_mismatch FINAL WHERE status = 'open' GROUP BY kind)\n")
	fmt.Fprintln(out, "broker (Kafka protocol):", st.Broker)
	fmt.Fprintln(out, "API key:", apiKey)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func splitHostPort(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr, ""
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:]
}
