package demo

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
)

// billingCounts counts open billing mismatches by kind (CONTRACT section
// 6): the totals of /v1/billing/mismatches cover every open mismatch, per
// currency and kind.
func billingCounts(ctx context.Context, qc *client.Client) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p, err := qc.BillingMismatches(ctx, url.Values{"status": {string(contract.StatusOpen)}, "limit": {"1"}})
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, t := range p.Totals.ByKind {
		out[t.Kind] += t.Count
	}
	return out, nil
}

// expectedOpen counts the fleet's ground-truth open findings by
// classification, to show beside what the pipeline found.
func expectedOpen(t *fleet.Truth) map[string]uint64 {
	m := map[string]uint64{}
	for _, f := range t.Findings {
		if f.Status == string(contract.StatusOpen) {
			m[f.Classification]++
		}
	}
	return m
}

func printSummary(out io.Writer, st stack.State, status *apitypes.Status, expected, billing, expBilling map[string]uint64, berr error, apiKey string) {
	f := status.Findings
	fmt.Fprintln(out, "\n=== summary ===")
	fmt.Fprintf(out, "open findings: %d (critical %d, blocking admission %d), resolved: %d\n",
		f.Open, f.CriticalOpen, f.BlockedAdmissions, f.Resolved)
	fmt.Fprintf(out, "  %-28s %6s %10s\n", "classification", "open", "fleet truth")
	keys := map[string]bool{}
	for k, n := range f.OpenByClassification {
		keys[k] = n > 0
	}
	for k := range expected {
		keys[k] = true
	}
	// billing_mismatch counts among the classifications (CONTRACT section
	// 4); its truth is the billing truth's, by kind below.
	var billingTruth uint64
	for _, n := range expBilling {
		billingTruth += n
	}
	for _, k := range sortedKeys(keys) {
		if keys[k] {
			want := expected[k]
			if k == string(contract.ClassBilling) {
				want = billingTruth
			}
			fmt.Fprintf(out, "  %-28s %6d %10d\n", k, f.OpenByClassification[k], want)
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
		for _, k := range sortedUnion(billing, expBilling) {
			fmt.Fprintf(out, "  %-28s %6d %10d\n", k, billing[k], expBilling[k])
		}
		fmt.Fprintln(out, "  (raised by the billing reconciler in the rater; docs/billing-model.md)")
	}

	q := st.Query
	auth := "-H 'Authorization: Bearer " + apiKey + "'"
	fmt.Fprintf(out, "\nweb UI: %s/ui/  (sign in with the API key below: admin in local_parity)\n", q)
	fmt.Fprintln(out, "query API (every request but /healthz needs the key; docs/access.md):", q)
	fmt.Fprintf(out, "  curl -s %s %s/v1/status\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s '%s/v1/drift?severity=critical&limit=20'\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s '%s/v1/drift?classification=identity_mismatch'\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s %s/v1/heatmap\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s '%s/v1/billing/mismatches?status=open'\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s %s/v1/rollouts\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s %s/v1/relays\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s '%s/v1/syncdebt?limit=20'\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s '%s/v1/drift?classification=%s'\n", auth, q, contract.ClassAuthority)
	fmt.Fprintf(out, "  curl -s %s '%s/v1/audit?limit=20'\n", auth, q)
	fmt.Fprintf(out, "  curl -s %s %s/metrics\n", auth, q)
	fmt.Fprintln(out, "ingest gateway:", st.Ingest)
	fmt.Fprintf(out, "  curl -s -H 'Authorization: Bearer %s' --data-binary @events.ndjson %s/v1/events\n", apiKey, st.Ingest)
	host, port := splitHostPort(st.ClickHouse)
	fmt.Fprintln(out, "ClickHouse:")
	fmt.Fprintf(out, "  clickhouse-client --host %s --port %s --database %s\n", host, port, st.Database)
	fmt.Fprintf(out, "  (e.g. SELECT classification, count() FROM drift_evidence FINAL WHERE status = 'open' GROUP BY classification)\n")
	fmt.Fprintf(out, "  (e.g. SELECT kind, count() FROM billing_mismatch FINAL WHERE status = 'open' GROUP BY kind)\n")
	fmt.Fprintln(out, "broker (Kafka protocol):", st.Broker)
	fmt.Fprintln(out, "API key (ingest and query API, local_parity only):", apiKey)
}

// sortedUnion returns the keys of a and b, each once, in order.
func sortedUnion[A, B any](a map[string]A, b map[string]B) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return sortedKeys(keys)
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
