// Package e2e runs the whole pipeline as a user runs it: the local stack
// (ClickHouse, the embedded broker and the four services as separate
// processes, exactly what `make up` starts) in a temporary directory on
// free loopback ports; a synthetic fleet fed through the ingest gateway
// over HTTP; and the findings read back through the query API and
// compared with the generator's ground truth.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
	"github.com/driftline/driftline/pipeline/service"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// moduleRoot returns the repository root.
func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod)))
}

// buildBinaries builds every command into a temporary directory.
func buildBinaries(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", bin+string(os.PathSeparator), "./cmd/...")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/...: %v\n%s", err, out)
	}
	return bin
}

// startStack starts the local stack of opts with its own ClickHouse and
// broker on free ports, and stops it when the test ends, showing the
// tail of every service's log if the test failed.
func startStack(t *testing.T, ctx context.Context, opts stack.Options) *stack.Stack {
	t.Helper()
	opts.FreePorts = true
	opts.Log = testLog{t}
	s, err := stack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.Stop(stopCtx); err != nil {
			t.Errorf("stop stack: %v", err)
		}
		if t.Failed() {
			for _, name := range []string{stack.NameIngest, stack.NameJoiner, stack.NameRater, stack.NameQuery, stack.NameBroker} {
				if b, err := os.ReadFile(s.LogPath(name)); err == nil {
					t.Logf("--- %s log (tail) ---\n%s", name, tail(string(b), 4000))
				}
			}
		}
	})
	return s
}

// compareFindings compares the findings the query API answered with the
// generator's ground truth.
func compareFindings(got []apitypes.Finding, truth *fleet.Truth) error {
	findings := make([]fleet.Finding, 0, len(got))
	for _, f := range got {
		findings = append(findings, fleet.Finding{EvidenceID: f.EvidenceID, Classification: f.Classification,
			Severity: f.Severity, Provider: f.Provider, ProviderID: f.ProviderID, Status: f.Status,
			RetryCount: int(f.RetryCount), Posture: f.Posture})
	}
	if diff := truth.Compare(findings, fleet.CompareOptions{}); !diff.Empty() {
		return fmt.Errorf("findings differ from the generator's ground truth (%d expected, %d found):\n%s", len(truth.Findings), len(findings), diff)
	}
	return nil
}

// checkHeatmap checks that the heat map counts, per classification, the
// ground truth's open findings within two minutes.
func checkHeatmap(t *testing.T, ctx context.Context, qc *client.Client, truth *fleet.Truth) {
	t.Helper()
	open := map[string]int{}
	for _, f := range truth.Findings {
		if f.Status == string(contract.StatusOpen) {
			open[f.Classification]++
		}
	}
	// The summaries are written beside the findings; on a cluster a
	// replica that was down serves what it has fetched so far until it
	// has caught up with its peer.
	testenv.CheckFor(t, 2*time.Minute, func() error {
		hm, err := qc.Heatmap(ctx, nil)
		if err != nil {
			return err
		}
		cells := map[string]int{}
		for _, c := range hm.Cells {
			cells[c.Classification] += int(c.Count)
		}
		var diffs []string
		for class, n := range open {
			if cells[class] != n {
				diffs = append(diffs, fmt.Sprintf("heat map has %d open %s, ground truth %d", cells[class], class, n))
			}
		}
		if len(diffs) > 0 {
			return errors.New(strings.Join(diffs, "; "))
		}
		return nil
	})
}

// pricebookEnv points the rater at the price book the deployment ships.
func pricebookEnv(t *testing.T) string {
	return "DRIFTLINE_RATER_PRICEBOOK=" + filepath.Join(moduleRoot(t), "deploy", "pricebook.json")
}

func TestFleetFindingsMatchGroundTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := startStack(t, ctx, stack.Options{
		Dir:        t.TempDir(),
		BinDir:     buildBinaries(t),
		Partitions: crashPartitions,
		Env:        []string{pricebookEnv(t)},
	})

	cfg := fleet.DefaultConfig()
	cfg.Seed = 42
	cfg.Ledger.Enabled = true
	gen, truth := newGenerator(t, cfg)
	stats, err := fleet.Feed(ctx, s.IngestURL(), service.DefaultLocalAPIKey, gen, fleet.FeedOptions{})
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	if stats.Rejected != 0 {
		t.Fatalf("gateway rejected %d generated events: %s", stats.Rejected, stats.RejectedReceipts)
	}
	// Redeliveries are answered as duplicates by the gateway or dropped by
	// the joiner's dedupe; nothing else may be lost.
	if stats.Accepted+stats.Duplicate != stats.Events {
		t.Fatalf("feed stats %+v: accepted+duplicate != events", stats)
	}

	waitGroupCaughtUp(t, s.BrokerAddr(), "driftline-joiner", 3*time.Minute)

	// The query API answers only a signed-in caller; the stack runs
	// local_parity, where the local key is admin.
	anon := &client.Client{BaseURL: s.QueryURL()}
	if _, err := anon.Status(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("status without a key: %v, want a 401", err)
	}
	qc := &client.Client{BaseURL: s.QueryURL(), APIKey: service.DefaultLocalAPIKey}
	sess, err := qc.Session(ctx)
	if err != nil || !slices.Equal(sess.Roles, []string{contract.RoleAdmin}) || sess.PolicyRev == "" {
		t.Fatalf("session of the local key: %+v, %v", sess, err)
	}
	got, err := qc.DriftAll(ctx, url.Values{"status": {"all"}, "limit": {"1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := compareFindings(got, truth); err != nil {
		t.Fatal(err)
	}
	t.Logf("fed %d events (%d accepted, %d duplicate); %d findings match the ground truth exactly", stats.Events, stats.Accepted, stats.Duplicate, len(got))

	// The heat map agrees with the findings.
	checkHeatmap(t, ctx, qc, truth)

	// The status endpoint sees the joiner's progress and no lag.
	st, err := qc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastRun == nil {
		t.Errorf("status has no last run: %+v", st)
	}

	checkBilling(t, s, truth)
}

// checkBilling waits until the open billing mismatches are exactly the
// fleet's usage anomalies (kind, usage_id and amounts) and rated_usage
// sums to the truth's totals per tenant and unit, exactly.
func checkBilling(t *testing.T, s *stack.Stack, truth *fleet.Truth) {
	t.Helper()
	conn := testenv.Open(t, s.ClickHouse())
	want := map[string]string{} // kind:usage_id -> rated/ledger amounts
	wantKinds := map[string]int{}
	for _, a := range truth.Usage.Anomalies {
		want[a.Kind+":"+a.UsageID] = a.RatedAmount + "/" + a.LedgerAmount
		wantKinds[a.Kind]++
	}
	wantTotals := map[string]string{}
	for _, tt := range truth.Usage.Totals {
		wantTotals[tt.TenantID+"/"+tt.UnitID] = tt.Quantity
	}
	testenv.CheckFor(t, 4*time.Minute, func() error {
		ctx := context.Background()
		rows, err := conn.Query(ctx, "SELECT kind, usage_id, rated_amount, ledger_amount FROM billing_mismatch FINAL WHERE status = 'open'")
		if err != nil {
			return err
		}
		got := map[string]string{}
		for rows.Next() {
			var kind, usageID, rated, ledger string
			if err := rows.Scan(&kind, &usageID, &rated, &ledger); err != nil {
				rows.Close()
				return err
			}
			got[kind+":"+usageID] = rated + "/" + ledger
		}
		rows.Close()
		var diffs []string
		for k, v := range want {
			g, ok := got[k]
			switch {
			case !ok:
				diffs = append(diffs, "missing "+k)
			case strings.HasPrefix(k, "rated_not_ledgered:") || strings.HasPrefix(k, "amount_mismatch:"):
				if g != v {
					diffs = append(diffs, fmt.Sprintf("%s amounts %s, want %s", k, g, v))
				}
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				diffs = append(diffs, "unexpected "+k)
			}
		}
		if len(diffs) > 0 {
			if len(diffs) > 20 {
				diffs = append(diffs[:20], fmt.Sprintf("... %d more", len(diffs)-20))
			}
			return fmt.Errorf("open billing mismatches (%d, want %d by kind %v) differ from the ground truth:\n%s",
				len(got), len(want), wantKinds, strings.Join(diffs, "\n"))
		}

		rows, err = conn.Query(ctx, "SELECT tenant_id, unit_id, quantity FROM rated_usage FINAL")
		if err != nil {
			return err
		}
		sums := map[string]decimal.Dec{}
		for rows.Next() {
			var tenant, unit, qty string
			if err := rows.Scan(&tenant, &unit, &qty); err != nil {
				rows.Close()
				return err
			}
			q, err := decimal.Parse(qty)
			if err != nil {
				rows.Close()
				return fmt.Errorf("rated_usage quantity %q: %w", qty, err)
			}
			k := tenant + "/" + unit
			if sums[k], err = decimal.Add(sums[k], q); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if len(sums) != len(wantTotals) {
			return fmt.Errorf("rated_usage has %d tenant/unit totals, ground truth %d", len(sums), len(wantTotals))
		}
		for k, w := range wantTotals {
			g, ok := sums[k]
			if !ok || !decimal.Equal(g, decimal.MustParse(w)) {
				return fmt.Errorf("rated_usage total %s is %s, ground truth %s", k, g, w)
			}
		}
		return nil
	})
	t.Logf("billing: %d open mismatches by kind %v and %d rated totals match the ground truth exactly", len(want), wantKinds, len(wantTotals))
	// Resolved rows are transient findings of a rater that lagged in
	// event time (docs/billing-model.md, known limits): shown, not failed.
	var resolved uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM billing_mismatch FINAL WHERE status = 'resolved'").Scan(&resolved); err != nil {
		t.Fatal(err)
	}
	t.Logf("billing: %d resolved mismatches", resolved)
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
