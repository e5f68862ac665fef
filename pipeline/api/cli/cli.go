// Package cli is the command-line client of the query API (cmd/driftctl):
// one subcommand per reading surface, and act for operator actions,
// printed as a table, JSON or CSV.
package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/service"
)

// command runs a subcommand: the answer as a table, and as the value to
// print as JSON.
type command func(ctx context.Context, c *client.Client, q url.Values, args []string) (table, any, error)

// commands are the subcommands.
var commands = map[string]command{
	"drift":      cmdDrift,
	"heatmap":    show((*client.Client).Heatmap, heatmapTable),
	"attention":  show((*client.Client).Attention, attentionTable),
	"billing":    cmdBilling,
	"automation": cmdAutomation,
	"node":       cmdNode,
	"act":        cmdAct,
	"timeline":   cmdTimeline,
	"rollouts":   show((*client.Client).Rollouts, rolloutsTable),
	"relays":     show((*client.Client).Relays, relaysTable),
	"syncdebt":   show((*client.Client).SyncDebt, syncDebtTable),
}

// show is the subcommand of a surface answered in one page, which takes
// no -all: get reads it, render prints it.
func show[A any](get func(*client.Client, context.Context, url.Values) (*A, error), render func(*A) table) command {
	return func(ctx context.Context, c *client.Client, q url.Values, _ []string) (table, any, error) {
		takeAll(q)
		a, err := get(c, ctx, q)
		if err != nil {
			return table{}, nil, err
		}
		return render(a), a, nil
	}
}

const usage = `usage: driftctl drift|heatmap|attention|billing|automation|node|timeline|rollouts|relays|syncdebt|act [flags] [name=value ...]

Each subcommand calls the query API and prints a table (default), JSON or
CSV. Trailing name=value arguments are passed as API parameters, e.g.

  driftctl drift severity=critical owning_domain=compute
  driftctl attention n=50 by=domain
  driftctl billing kind=amount_mismatch tenant=t1
  driftctl automation tenant_id=t1  is financial automation stopped for t1 (product_id= for one product)
  driftctl node                     node list (filters: gate=, connectivity_mode=, ...)
  driftctl node n-0042              one node: gate, lifecycle, authority, supply chain, diff, recent events, findings
  driftctl node -tag gpu -tag eu    nodes carrying both tags (-tag works on drift, heatmap, attention, relays too)
  driftctl timeline n-0042          the node's lifecycle transitions, newest first (limit=)
  driftctl rollouts                 rollout per policy bundle and domain (domain_id=, policy_bundle_id=)
  driftctl relays domain_id=d-eu1   relay topology: nodes and worst sync debt per relay
  driftctl syncdebt from=2026-11-21T10:00:00Z   sync debt per domain, relay and minute (relay_id=, to=, limit=)
  driftctl heatmap status=all
  driftctl act acknowledge orphan_provider_resource:maas/n-0042 reason="on it"
  driftctl act retry stale_lifecycle_state:app_runtime/a-7 reason=redeploy key=K   (key: Idempotency-Key)
  driftctl act assign batch owning_domain=compute assignee=ops-eu reason=triage preview=true

Flags:
`

// table is a printable answer: a header and rows.
type table struct {
	head []string
	rows [][]string
	// foot is printed under a human table (totals, cursor).
	foot []string
}

// flags are the options every subcommand takes.
type flags struct {
	api, key, out string
	all           bool
	timeout       time.Duration
	tags          []string
}

func newFlagSet(name string) (*flag.FlagSet, *flags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	var f flags
	fs.StringVar(&f.api, "api", service.Env("DRIFTLINE_QUERY_URL", "http://"+service.DefaultQueryAddr), "base URL of the query API (env DRIFTLINE_QUERY_URL)")
	fs.StringVar(&f.key, "key", service.Env("DRIFTLINE_QUERY_KEY", service.DefaultLocalAPIKey), "API key of the query API (env DRIFTLINE_QUERY_KEY); the default is the local stack's key")
	fs.StringVar(&f.out, "o", "table", "output: table, json or csv")
	fs.BoolVar(&f.all, "all", false, "drift, billing, node list: follow next_cursor to the last page (large fleets: prefer -o csv with the API's export)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "bound on the whole command")
	fs.Func("tag", "keep what carries this tag (repeat: every tag must match); same as tag=", func(v string) error {
		f.tags = append(f.tags, v)
		return nil
	})
	return fs, &f
}

// PrintUsage writes the subcommands, examples and flags to w.
func PrintUsage(w io.Writer) {
	fs, _ := newFlagSet("driftctl")
	fs.SetOutput(w)
	fs.Usage()
}

// IsCommand reports whether name is a subcommand.
func IsCommand(name string) bool {
	_, ok := commands[name]
	return ok
}

// Run runs subcommand name with its arguments, printing the answer to
// stdout. -h answers flag.ErrHelp after printing the usage.
func Run(name string, args []string, stdout io.Writer) error {
	cmd, ok := commands[name]
	if !ok {
		return fmt.Errorf("unknown subcommand %q", name)
	}
	fs, opt := newFlagSet("driftctl " + name)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opt.out != "table" && opt.out != "json" && opt.out != "csv" {
		return fmt.Errorf("-o %q: want table, json or csv", opt.out)
	}
	q := url.Values{}
	var pos []string
	for _, a := range fs.Args() {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			pos = append(pos, a)
			continue
		}
		q.Add(k, v)
	}
	for _, tag := range opt.tags {
		q.Add("tag", tag)
	}
	if opt.all {
		q.Set("__all", "1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), opt.timeout)
	defer cancel()
	c := &client.Client{BaseURL: opt.api, APIKey: opt.key}
	t, raw, err := cmd(ctx, c, q, pos)
	if err != nil {
		if ae, ok := errors.AsType[*client.APIError](err); ok && ae.Body.Allowed != nil {
			return fmt.Errorf("%w (allowed: %s)", err, strings.Join(ae.Body.Allowed, ", "))
		}
		return err
	}
	switch opt.out {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(raw)
	case "csv":
		w := csv.NewWriter(stdout)
		_ = w.Write(t.head)
		_ = w.WriteAll(t.rows)
		return w.Error()
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(t.head, "\t")))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range t.foot {
		fmt.Fprintln(stdout, f)
	}
	return nil
}

// takeAll removes the -all marker from q.
func takeAll(q url.Values) bool {
	all := q.Get("__all") == "1"
	q.Del("__all")
	return all
}

func ts(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func score(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// listing reads every page of a paged listing (all) or one, whose next
// cursor goes in t's foot; raw is the answer to print as JSON.
func listing[P, T any](ctx context.Context, q url.Values, all bool, t *table,
	every func(context.Context, url.Values) ([]T, error), one func(context.Context, url.Values) (*P, error),
	items func(*P) ([]T, string)) (rows []T, raw any, err error) {
	if all {
		rows, err = every(ctx, q)
		return rows, rows, err
	}
	p, err := one(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	rows, next := items(p)
	if next != "" {
		t.foot = append(t.foot, "more: cursor="+next+" (or -all)")
	}
	return rows, p, nil
}

func cmdDrift(ctx context.Context, c *client.Client, q url.Values, pos []string) (table, any, error) {
	t := table{head: []string{"evidence_id", "severity", "status", "classification", "owning_domain", "expected", "observed", "posture", "first_seen_at", "score"}}
	fs, raw, err := listing(ctx, q, takeAll(q), &t, c.DriftAll, c.Drift,
		func(p *apitypes.DriftPage) ([]apitypes.Finding, string) { return p.Findings, p.NextCursor })
	if err != nil {
		return t, nil, err
	}
	for _, f := range fs {
		t.rows = append(t.rows, []string{f.EvidenceID, f.Severity, f.Status, f.Classification, f.OwningDomain,
			f.ExpectedState, f.ObservedState, f.Posture, ts(&f.FirstSeenAt), score(f.AttentionScore)})
	}
	return t, raw, nil
}

func heatmapTable(h *apitypes.Heatmap) table {
	t := table{head: append([]string{"owning_domain"}, h.Classifications...)}
	cells := map[[2]string]apitypes.HeatCell{}
	for _, cell := range h.Cells {
		cells[[2]string{cell.OwningDomain, cell.Classification}] = cell
	}
	for _, d := range h.Domains {
		row := []string{d}
		for _, cl := range h.Classifications {
			cell, ok := cells[[2]string{d, cl}]
			switch {
			case !ok:
				row = append(row, "0")
			case cell.Critical > 0:
				row = append(row, fmt.Sprintf("%d (%d crit)", cell.Count, cell.Critical))
			default:
				row = append(row, strconv.FormatUint(cell.Count, 10))
			}
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func attentionTable(a *apitypes.Attention) table {
	t := table{head: []string{"queue", "rank", "score", "kind", "id", "owning_domain", "what"}}
	add := func(queue string, items []apitypes.AttentionItem) {
		for i, it := range items {
			what := ""
			if it.Finding != nil {
				what = it.Finding.Severity + " " + it.Finding.Classification + " " + it.Finding.Posture
			} else if it.Node != nil {
				what = "gate " + it.Node.Gate + " " + it.Node.ConnectivityMode + " " + it.Node.Health
			}
			t.rows = append(t.rows, []string{queue, strconv.Itoa(i + 1), score(it.AttentionScore), it.Kind, it.ID, it.OwningDomain, what})
		}
	}
	add("global", a.Global)
	for _, d := range a.Domains {
		add(d.OwningDomain, d.Items)
	}
	return t
}

func cmdBilling(ctx context.Context, c *client.Client, q url.Values, _ []string) (table, any, error) {
	all := takeAll(q)
	t := table{head: []string{"mismatch_id", "kind", "tenant_id", "product_id", "unit_id", "quantity", "conflict_quantity", "rated_amount", "ledger_amount", "amount_at_risk", "currency", "status", "first_seen_at"}}
	var pages []*apitypes.BillingPage
	for {
		p, err := c.BillingMismatches(ctx, q)
		if err != nil {
			return t, nil, err
		}
		pages = append(pages, p)
		if !all || p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
	}
	last := pages[len(pages)-1]
	for _, p := range pages {
		for _, m := range p.Mismatches {
			t.rows = append(t.rows, []string{m.MismatchID, m.Kind, m.TenantID, m.ProductID, m.UnitID, m.Quantity, m.ConflictQuantity, m.RatedAmount,
				m.LedgerAmount, m.AmountAtRisk, m.Currency, m.Status, m.FirstSeenAt.UTC().Format(time.RFC3339)})
		}
	}
	for _, c := range last.Totals.ByCurrency {
		cur := c.Currency
		if cur == "" {
			cur = "(no currency)"
		}
		t.foot = append(t.foot, fmt.Sprintf("total %s: %d mismatches, at risk %s (rated %s, ledger %s, unpriced %d)",
			cur, c.Count, c.AmountAtRisk, c.RatedAmount, c.LedgerAmount, c.Unpriced))
	}
	if last.NextCursor != "" {
		t.foot = append(t.foot, "more: cursor="+last.NextCursor+" (or -all)")
	}
	if len(pages) == 1 {
		return t, last, nil
	}
	return t, pages, nil
}

func cmdAutomation(ctx context.Context, c *client.Client, q url.Values, _ []string) (table, any, error) {
	t := table{head: []string{"scope", "kind", "stops", "open", "amount_at_risk"}}
	a, err := c.Automation(ctx, q)
	if err != nil {
		return t, nil, err
	}
	risks := func(rs []apitypes.MoneyRisk) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Amount+" "+r.Currency)
		}
		if len(out) == 0 {
			return "-"
		}
		return strings.Join(out, ", ")
	}
	for _, r := range a.Reasons {
		t.rows = append(t.rows, []string{r.Scope, r.Kind, strconv.FormatBool(r.Stops), strconv.FormatUint(r.Open, 10), risks(r.AmountAtRisk)})
	}
	for _, p := range a.Products {
		t.foot = append(t.foot, fmt.Sprintf("product %s: stopped=%t, %d open, at risk %s", p.ProductID, p.Stopped, p.OpenMismatches, risks(p.AmountAtRisk)))
	}
	who := "tenant " + a.TenantID
	if a.ProductID != "" {
		who += " product " + a.ProductID
	}
	t.foot = append(t.foot, fmt.Sprintf("%s: stopped=%t (%d open mismatches that stop it, at risk %s; as of %s)",
		who, a.Stopped, a.OpenMismatches, risks(a.AmountAtRisk), ts(a.AsOf)))
	return t, a, nil
}

func cmdNode(ctx context.Context, c *client.Client, q url.Values, pos []string) (table, any, error) {
	all := takeAll(q)
	if len(pos) > 1 {
		return table{}, nil, errors.New("node: give at most one node_id")
	}
	if len(pos) == 1 {
		d, err := c.Node(ctx, pos[0])
		if err != nil {
			return table{}, nil, err
		}
		t := table{head: []string{"section", "field", "desired", "observed", "note"}}
		t.rows = append(t.rows, []string{"gate", d.Gate.Gate, "", "", d.Gate.Summary})
		for _, cmp := range d.Comparison {
			note := "match"
			if !cmp.Match {
				note = "DIFFERS"
			}
			t.rows = append(t.rows, []string{"desired_vs_observed", cmp.Field, cmp.Desired, cmp.Observed, note + " (" + cmp.Source + ")"})
		}
		if n := d.Node; n != nil {
			t.rows = append(t.rows, []string{"evidence", "node_agent_state", "", n.NodeAgentState, n.NodeAgentReason},
				[]string{"evidence", "connectivity_mode", "", n.ConnectivityMode, fmt.Sprintf("%ds behind, backlog %d", n.SecondsBehind, n.BacklogMessages)},
				[]string{"evidence", "health", "", n.Health, "workload " + n.WorkloadImpact},
				[]string{"evidence", "terminal_stream_probe", "", n.TerminalStreamProbe, "update_path " + n.UpdatePath})
		}
		t.rows = append(t.rows, nodeFleetRows(d)...)
		for _, f := range d.Findings {
			t.rows = append(t.rows, []string{"finding", f.Finding.EvidenceID, f.Finding.ExpectedState, f.Finding.ObservedState,
				f.Finding.Status + " " + f.Finding.Severity + " " + f.Finding.Posture})
			for _, h := range f.History {
				t.rows = append(t.rows, []string{"history", f.Finding.EvidenceID, h.At.UTC().Format(time.RFC3339), h.ObservedState, h.Transition + " " + h.Status})
			}
		}
		return t, d, nil
	}
	t := table{head: []string{"node_id", "owning_domain", "gate", "connectivity_mode", "health", "node_agent_state", "agent_observed", "agent_expected", "last_seen_at", "score"}}
	ns, raw, err := listing(ctx, q, all, &t, c.NodesAll, c.Nodes,
		func(p *apitypes.NodePage) ([]apitypes.Node, string) { return p.Nodes, p.NextCursor })
	if err != nil {
		return t, nil, err
	}
	for _, n := range ns {
		t.rows = append(t.rows, []string{n.NodeID, n.OwningDomain, n.Gate, n.ConnectivityMode, n.Health, n.NodeAgentState,
			n.ObservedAgentVersion, n.ExpectedAgentVersion, ts(n.LastSeenAt), score(n.AttentionScore)})
	}
	return t, raw, nil
}
