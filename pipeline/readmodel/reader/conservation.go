package reader

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// The billing status surfaces: the conservation of the billing windows
// (billing_window) and the financial-automation flag (billing_mismatch).
// docs/billing-model.md defines both.

// conservation columns of billing_window, in ConservationTotals order.
var (
	conservationCounts = []string{"accepted", "rejected", "rating_pending", "not_rated", "rated", "rated_without_usage",
		"ledgered", "ledger_pending", "not_ledgered", "amount_mismatch", "ledger_entries", "ledger_without_rated", "unexplained"}
	conservationAmounts = []string{"rated_amount", "rated_without_usage_amount", "ledgered_amount", "ledger_pending_amount",
		"not_ledgered_amount", "amount_mismatch_amount", "ledger_amount", "ledger_without_rated_amount"}
)

func countDests(c *apitypes.ConservationTotals) []any {
	return []any{&c.Accepted, &c.Rejected, &c.RatingPending, &c.NotRated, &c.Rated, &c.RatedWithoutUsage,
		&c.Ledgered, &c.LedgerPending, &c.NotLedgered, &c.AmountMismatch, &c.LedgerEntries, &c.LedgerWithoutRated, &c.Unexplained}
}

func amountDests(c *apitypes.ConservationTotals) []*string {
	return []*string{&c.RatedAmount, &c.RatedWithoutUsageAmount, &c.LedgeredAmount, &c.LedgerPendingAmount,
		&c.NotLedgeredAmount, &c.AmountMismatchAmount, &c.LedgerAmount, &c.LedgerWithoutRatedAmount}
}

// windowSQL sums the partitions of every window (tenant, product,
// currency, hour) under conds: w_<count> and w_<amount> (Decimal128),
// s_<amount> the scale of the amount, and the window's key.
func windowSQL(conds []string) string {
	var cols []string
	for _, c := range conservationCounts {
		cols = append(cols, fmt.Sprintf("sum(%s) AS w_%s", c, c))
	}
	for _, a := range conservationAmounts {
		cols = append(cols, fmt.Sprintf("sum(%s) AS w_%s", decSQL(a), a), fmt.Sprintf("max(%s) AS s_%s", scaleSQL(a), a))
	}
	return fmt.Sprintf(`SELECT tenant_id AS w_tenant, product_id AS w_product, currency AS w_currency, window_start AS w_start, %s
	FROM billing_window FINAL%s GROUP BY tenant_id, product_id, currency, window_start
	HAVING w_accepted + w_rated + w_ledger_entries > 0`, strings.Join(cols, ", "), whereClause(conds))
}

// totalsSQL returns the select list that sums the windows of windowSQL.
func totalsSQL() string {
	var cols []string
	for _, c := range conservationCounts {
		cols = append(cols, fmt.Sprintf("sum(w_%s)", c))
	}
	for _, a := range conservationAmounts {
		cols = append(cols, fmt.Sprintf("toString(sum(w_%s))", a), fmt.Sprintf("max(s_%s)", a))
	}
	return strings.Join(cols, ", ")
}

// scanTotals scans a row of the key columns (into keys) followed by
// totalsSQL's columns into c, with its amounts formatted at their scale.
func scanTotals(r driver.Rows, c *apitypes.ConservationTotals, keys ...any) error {
	dests := append(keys, countDests(c)...)
	amounts := make([]string, len(conservationAmounts))
	scales := make([]uint64, len(conservationAmounts))
	for i := range conservationAmounts {
		dests = append(dests, &amounts[i], &scales[i])
	}
	if err := r.Scan(dests...); err != nil {
		return err
	}
	out := amountDests(c)
	for i := range amounts {
		f, err := parseFixed(amounts[i])
		if err != nil {
			return err
		}
		*out[i] = f.format(int(scales[i]))
	}
	return nil
}

// conserved checks the identities of docs/billing-model.md on t.
func conserved(c *apitypes.ConservationTotals) bool {
	if c.Accepted+c.RatedWithoutUsage != c.Rated+c.RatingPending+c.NotRated+c.Rejected ||
		c.Rated != c.Ledgered+c.LedgerPending+c.NotLedgered+c.AmountMismatch ||
		c.LedgerEntries != c.Ledgered+c.AmountMismatch+c.LedgerWithoutRated {
		return false
	}
	var rated, parts big.Rat
	if _, ok := rated.SetString(c.RatedAmount); !ok {
		return false
	}
	for _, a := range []string{c.LedgeredAmount, c.LedgerPendingAmount, c.NotLedgeredAmount, c.AmountMismatchAmount} {
		var r big.Rat
		if _, ok := r.SetString(a); !ok {
			return false
		}
		parts.Add(&parts, &r)
	}
	return rated.Cmp(&parts) == 0
}

// Conservation reads the billing section of the status: the
// conservation per tenant and currency and the most recent unbalanced
// windows. On an error it returns what it read so far.
func (rd *Reader) Conservation(ctx context.Context) (apitypes.BillingConservation, error) {
	out := apitypes.BillingConservation{WindowSeconds: 3600, Tenants: []apitypes.TenantConservation{}, Unbalanced: []apitypes.ConservationWindow{}}
	err := rd.readConservation(ctx, &out)
	return out, err
}

func (rd *Reader) readConservation(ctx context.Context, out *apitypes.BillingConservation) error {
	conds, args := scopeWhere(ctx, "tenant_id", nil, nil)
	sql := fmt.Sprintf(`SELECT w_tenant, w_currency, count(), countIf(w_unexplained > 0), %s
	FROM (%s) GROUP BY w_tenant, w_currency ORDER BY w_tenant, w_currency`, totalsSQL(), windowSQL(conds))
	// Balanced stays false when the query fails before any row.
	balanced := true
	err := rd.each(ctx, "billing_conservation", sql, args, func(r driver.Rows) error {
		var tc apitypes.TenantConservation
		if err := scanTotals(r, &tc.ConservationTotals, &tc.TenantID, &tc.Currency, &tc.Windows, &tc.WindowsUnbalanced); err != nil {
			return err
		}
		tc.Conserved = conserved(&tc.ConservationTotals)
		out.Windows += tc.Windows
		out.WindowsUnbalanced += tc.WindowsUnbalanced
		balanced = balanced && tc.Conserved && tc.WindowsUnbalanced == 0
		out.Balanced = balanced
		out.Tenants = append(out.Tenants, tc)
		return nil
	})
	if err == nil {
		out.Balanced = balanced
	}
	if err != nil || out.WindowsUnbalanced == 0 {
		return err
	}
	out.Unbalanced, _, err = rd.windows(ctx, conds, args, true, apitypes.MaxUnbalancedShown)
	return err
}

// WindowFilter selects conservation windows (billing_window).
type WindowFilter struct {
	Tenants    []string
	Products   []string
	Currencies []string
	// From and To, when set, keep the windows starting at or after From
	// and before To.
	From, To time.Time
	// Unbalanced keeps only the windows with a line unexplained past its
	// grace.
	Unbalanced bool
	// Limit bounds the windows returned.
	Limit int
}

// ConservationWindows reads the windows f selects, newest first, at most
// f.Limit, and whether more matched.
func (rd *Reader) ConservationWindows(ctx context.Context, f WindowFilter) ([]apitypes.ConservationWindow, bool, error) {
	conds, args := listWhere([]listColumn{{"tenant_id", f.Tenants}, {"product_id", f.Products}, {"currency", f.Currencies}})
	conds, args = rangeWhere(conds, args, "window_start", f.From, f.To)
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	return rd.windows(ctx, conds, args, f.Unbalanced, f.Limit)
}

// windows reads the windows of billing_window rows under conds (only the
// unbalanced ones when unbalanced), newest first, at most limit, and
// whether more matched.
func (rd *Reader) windows(ctx context.Context, conds []string, args []any, unbalanced bool, limit int) ([]apitypes.ConservationWindow, bool, error) {
	where := ""
	if unbalanced {
		where = " WHERE w_unexplained > 0"
	}
	sql := fmt.Sprintf(`SELECT w_tenant, w_product, w_currency, w_start, %s FROM (%s)%s
	GROUP BY w_tenant, w_product, w_currency, w_start ORDER BY w_start DESC, w_tenant, w_product, w_currency LIMIT %d`,
		totalsSQL(), windowSQL(conds), where, limit+1)
	out := []apitypes.ConservationWindow{}
	err := rd.each(ctx, "billing_windows", sql, args, func(r driver.Rows) error {
		var w apitypes.ConservationWindow
		if err := scanTotals(r, &w.ConservationTotals, &w.TenantID, &w.ProductID, &w.Currency, &w.WindowStart); err != nil {
			return err
		}
		w.WindowStart = w.WindowStart.UTC()
		w.Balanced, w.Conserved = w.Unexplained == 0, conserved(&w.ConservationTotals)
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

func stops(kind string) bool {
	for _, k := range apitypes.AutomationStoppingKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Automation reads whether financial automation stops for tenant, and
// product if not empty: the tenant's open mismatches and the unbalanced
// windows no tenant is named for.
func (rd *Reader) Automation(ctx context.Context, tenant, product string) (apitypes.Automation, error) {
	a := apitypes.Automation{TenantID: tenant, ProductID: product, AmountAtRisk: []apitypes.MoneyRisk{}, Reasons: []apitypes.StopReason{}, Products: []apitypes.ProductAutomation{}}
	rated, ledger := decSQL("rated_amount"), decSQL("ledger_amount")
	atRisk := fmt.Sprintf("multiIf(kind = 'amount_mismatch', abs(%s - %s), rated_amount != '', %s, %s)", rated, ledger, rated, ledger)
	conds := []string{"status = 'open'", "(tenant_id = ? OR (tenant_id = '' AND kind = 'window_unbalanced'))"}
	args := []any{tenant}
	if product != "" {
		conds = append(conds, "(product_id = ? OR tenant_id = '')")
		args = append(args, product)
	}
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	sql := fmt.Sprintf(`SELECT tenant_id, product_id, kind, currency, count(), toString(sum(%s)),
	toUInt64(max(greatest(%s, %s))), max(updated_at)
	FROM billing_mismatch FINAL%s GROUP BY tenant_id, product_id, kind, currency
	ORDER BY tenant_id, product_id, kind, currency`, atRisk, scaleSQL("rated_amount"), scaleSQL("ledger_amount"), whereClause(conds))
	type acc struct {
		open  uint64
		risk  map[string]*fixed
		scale map[string]int
	}
	newAcc := func() *acc { return &acc{risk: map[string]*fixed{}, scale: map[string]int{}} }
	add := func(x *acc, cur string, n uint64, f fixed, scale int) {
		x.open += n
		if x.risk[cur] == nil {
			x.risk[cur] = &fixed{}
		}
		x.risk[cur].add(f)
		x.scale[cur] = max(x.scale[cur], scale)
	}
	risks := func(x *acc) []apitypes.MoneyRisk {
		out := []apitypes.MoneyRisk{}
		for cur, f := range x.risk {
			out = append(out, apitypes.MoneyRisk{Currency: cur, Amount: f.format(x.scale[cur])})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Currency < out[j].Currency })
		return out
	}
	total := newAcc()
	type reasonKey struct{ kind, scope string }
	reasons := map[reasonKey]*acc{}
	products := map[string]*acc{}
	var asOf time.Time
	unattributed := newAcc()
	err := rd.each(ctx, "billing_automation", sql, args, func(r driver.Rows) error {
		var (
			ten, prod, kind, cur, sum string
			n, scale                  uint64
			updated                   time.Time
		)
		if err := r.Scan(&ten, &prod, &kind, &cur, &n, &sum, &scale, &updated); err != nil {
			return err
		}
		f, err := parseFixed(sum)
		if err != nil {
			return err
		}
		if updated.After(asOf) {
			asOf = updated
		}
		scope := "tenant"
		if ten == "" {
			scope = "unattributed"
		}
		rk := reasonKey{kind, scope}
		if reasons[rk] == nil {
			reasons[rk] = newAcc()
		}
		add(reasons[rk], cur, n, f, int(scale))
		if !stops(kind) {
			return nil
		}
		add(total, cur, n, f, int(scale))
		if ten == "" {
			add(unattributed, cur, n, f, int(scale))
			return nil
		}
		if products[prod] == nil {
			products[prod] = newAcc()
		}
		add(products[prod], cur, n, f, int(scale))
		return nil
	})
	if err != nil {
		return a, err
	}
	a.Stopped = total.open > 0
	a.OpenMismatches = total.open
	a.AmountAtRisk = risks(total)
	if !asOf.IsZero() {
		t := asOf.UTC()
		a.AsOf = &t
	}
	for rk, x := range reasons {
		a.Reasons = append(a.Reasons, apitypes.StopReason{Kind: rk.kind, Stops: stops(rk.kind), Scope: rk.scope, Open: x.open, AmountAtRisk: risks(x)})
	}
	sort.Slice(a.Reasons, func(i, j int) bool {
		if a.Reasons[i].Scope != a.Reasons[j].Scope {
			return a.Reasons[i].Scope > a.Reasons[j].Scope // tenant before unattributed
		}
		return a.Reasons[i].Kind < a.Reasons[j].Kind
	})
	if product == "" {
		for prod, x := range products {
			// Unattributed rows stop every product.
			pa := apitypes.ProductAutomation{ProductID: prod, OpenMismatches: x.open + unattributed.open}
			for cur, f := range unattributed.risk {
				if x.risk[cur] == nil {
					x.risk[cur] = &fixed{}
				}
				x.risk[cur].add(*f)
				x.scale[cur] = max(x.scale[cur], unattributed.scale[cur])
			}
			pa.Stopped, pa.AmountAtRisk = pa.OpenMismatches > 0, risks(x)
			a.Products = append(a.Products, pa)
		}
		sort.Slice(a.Products, func(i, j int) bool { return a.Products[i].ProductID < a.Products[j].ProductID })
	}
	return a, nil
}
