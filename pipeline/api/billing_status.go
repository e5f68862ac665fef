package api

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/contract"
)

// The billing status surfaces: the conservation section of /v1/status
// (billing_window) and the financial-automation flag of
// /v1/billing/automation (billing_mismatch). docs/billing-model.md defines
// both.

// BillingConservation is the billing section of GET /v1/status: the
// conservation windows (tenant, product, currency, UTC hour of the usage)
// summed per tenant and currency.
type BillingConservation struct {
	// WindowSeconds is the width of a window (3600).
	WindowSeconds int `json:"window_seconds"`
	// Windows counts the windows holding any line; WindowsUnbalanced
	// those holding a line without what should be behind it past its
	// grace (each is an open window_unbalanced mismatch).
	Windows           uint64 `json:"windows"`
	WindowsUnbalanced uint64 `json:"windows_unbalanced"`
	// Balanced is true when no window is unbalanced and the identities
	// hold for every tenant.
	Balanced bool                 `json:"balanced"`
	Tenants  []TenantConservation `json:"tenants"` // by tenant_id, currency; never null
	// Unbalanced lists the most recent unbalanced windows (at most
	// MaxUnbalancedShown), newest first; never null.
	Unbalanced []ConservationWindow `json:"unbalanced"`
	// Error is set when the section could not be read; the rest of the
	// status is still served.
	Error string `json:"error,omitempty"`
}

// MaxUnbalancedShown bounds BillingConservation.Unbalanced.
const MaxUnbalancedShown = 20

// ConservationTotals are the summed counts and exact amounts of
// billing_window rows (docs/billing-model.md, "Conservation windows").
type ConservationTotals struct {
	Accepted           uint64 `json:"accepted"`
	Rejected           uint64 `json:"rejected"`
	RatingPending      uint64 `json:"rating_pending"`
	NotRated           uint64 `json:"not_rated"`
	Rated              uint64 `json:"rated"`
	RatedWithoutUsage  uint64 `json:"rated_without_usage"`
	Ledgered           uint64 `json:"ledgered"`
	LedgerPending      uint64 `json:"ledger_pending"`
	NotLedgered        uint64 `json:"not_ledgered"`
	AmountMismatch     uint64 `json:"amount_mismatch"`
	LedgerEntries      uint64 `json:"ledger_entries"`
	LedgerWithoutRated uint64 `json:"ledger_without_rated"`
	Unexplained        uint64 `json:"unexplained"`

	RatedAmount              string `json:"rated_amount"`
	RatedWithoutUsageAmount  string `json:"rated_without_usage_amount"`
	LedgeredAmount           string `json:"ledgered_amount"`
	LedgerPendingAmount      string `json:"ledger_pending_amount"`
	NotLedgeredAmount        string `json:"not_ledgered_amount"`
	AmountMismatchAmount     string `json:"amount_mismatch_amount"`
	LedgerAmount             string `json:"ledger_amount"`
	LedgerWithoutRatedAmount string `json:"ledger_without_rated_amount"`
}

// TenantConservation is the conservation of one tenant in one currency.
type TenantConservation struct {
	TenantID          string `json:"tenant_id"` // empty: postings for usage nobody rated nor reported
	Currency          string `json:"currency"`
	Windows           uint64 `json:"windows"`
	WindowsUnbalanced uint64 `json:"windows_unbalanced"`
	ConservationTotals
	// Conserved reports the three identities on the totals:
	// accepted + rated_without_usage = rated + rating_pending + not_rated + rejected;
	// rated = ledgered + ledger_pending + not_ledgered + amount_mismatch (counts and amounts);
	// ledger_entries = ledgered + amount_mismatch + ledger_without_rated.
	Conserved bool `json:"conserved"`
}

// ConservationWindow is one window (its partitions summed).
type ConservationWindow struct {
	TenantID    string    `json:"tenant_id"`
	ProductID   string    `json:"product_id"`
	Currency    string    `json:"currency"`
	WindowStart time.Time `json:"window_start"`
	ConservationTotals
	// Balanced: no line without what should be behind it past its grace
	// (unexplained = 0). Conserved: the identities hold.
	Balanced  bool `json:"balanced"`
	Conserved bool `json:"conserved"`
}

// ConservationPage is the answer of GET /v1/billing/conservation.
type ConservationPage struct {
	Windows   []ConservationWindow `json:"windows"` // newest first, then tenant, product, currency; never null
	Count     int                  `json:"count"`
	Truncated bool                 `json:"truncated"` // more windows match than limit
}

// Limits of /v1/billing/conservation.
const (
	DefaultConservationLimit = 100
	MaxConservationLimit     = 10000
)

// conservation columns of billing_window, in ConservationTotals order.
var (
	conservationCounts = []string{"accepted", "rejected", "rating_pending", "not_rated", "rated", "rated_without_usage",
		"ledgered", "ledger_pending", "not_ledgered", "amount_mismatch", "ledger_entries", "ledger_without_rated", "unexplained"}
	conservationAmounts = []string{"rated_amount", "rated_without_usage_amount", "ledgered_amount", "ledger_pending_amount",
		"not_ledgered_amount", "amount_mismatch_amount", "ledger_amount", "ledger_without_rated_amount"}
)

func (c *ConservationTotals) countDests() []any {
	return []any{&c.Accepted, &c.Rejected, &c.RatingPending, &c.NotRated, &c.Rated, &c.RatedWithoutUsage,
		&c.Ledgered, &c.LedgerPending, &c.NotLedgered, &c.AmountMismatch, &c.LedgerEntries, &c.LedgerWithoutRated, &c.Unexplained}
}

func (c *ConservationTotals) amountDests() []*string {
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

// scanTotals returns the scan destinations of totalsSQL's columns and a
// function that formats the amounts into c once scanned.
func scanTotals(c *ConservationTotals) ([]any, func() error) {
	dests := c.countDests()
	amounts := make([]string, len(conservationAmounts))
	scales := make([]uint64, len(conservationAmounts))
	for i := range conservationAmounts {
		dests = append(dests, &amounts[i], &scales[i])
	}
	return dests, func() error {
		out := c.amountDests()
		for i := range amounts {
			f, err := parseFixed(amounts[i])
			if err != nil {
				return err
			}
			*out[i] = f.format(int(scales[i]))
		}
		return nil
	}
}

// conserved checks the identities of docs/billing-model.md on t.
func (c *ConservationTotals) conserved() bool {
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

// billingConservation reads the billing section of the status.
func (s *Server) billingConservation(ctx context.Context) BillingConservation {
	out := BillingConservation{WindowSeconds: 3600, Tenants: []TenantConservation{}, Unbalanced: []ConservationWindow{}}
	if err := s.readConservation(ctx, &out); err != nil {
		out.Error = err.Error()
	}
	return out
}

func (s *Server) readConservation(ctx context.Context, out *BillingConservation) error {
	sql := fmt.Sprintf(`SELECT w_tenant, w_currency, count(), countIf(w_unexplained > 0), %s
	FROM (%s) GROUP BY w_tenant, w_currency ORDER BY w_tenant, w_currency`, totalsSQL(), windowSQL(nil))
	rows, err := s.readQuery(ctx, "billing_conservation", sql)
	if err != nil {
		return err
	}
	out.Balanced = true
	err = s.scanAll("billing_conservation", rows, func(r driver.Rows) error {
		var tc TenantConservation
		dests, finish := scanTotals(&tc.ConservationTotals)
		if err := r.Scan(append([]any{&tc.TenantID, &tc.Currency, &tc.Windows, &tc.WindowsUnbalanced}, dests...)...); err != nil {
			return err
		}
		if err := finish(); err != nil {
			return err
		}
		tc.Conserved = tc.conserved()
		out.Windows += tc.Windows
		out.WindowsUnbalanced += tc.WindowsUnbalanced
		out.Balanced = out.Balanced && tc.Conserved && tc.WindowsUnbalanced == 0
		out.Tenants = append(out.Tenants, tc)
		return nil
	})
	if err != nil || out.WindowsUnbalanced == 0 {
		return err
	}
	out.Unbalanced, _, err = s.conservationWindows(ctx, nil, nil, true, MaxUnbalancedShown)
	return err
}

// conservationWindows reads the windows of billing_window rows under
// conds (only the unbalanced ones when unbalanced), newest first, at most
// limit, and whether more matched.
func (s *Server) conservationWindows(ctx context.Context, conds []string, args []any, unbalanced bool, limit int) ([]ConservationWindow, bool, error) {
	where := ""
	if unbalanced {
		where = " WHERE w_unexplained > 0"
	}
	sql := fmt.Sprintf(`SELECT w_tenant, w_product, w_currency, w_start, %s FROM (%s)%s
	GROUP BY w_tenant, w_product, w_currency, w_start ORDER BY w_start DESC, w_tenant, w_product, w_currency LIMIT %d`,
		totalsSQL(), windowSQL(conds), where, limit+1)
	rows, err := s.readQuery(ctx, "billing_windows", sql, args...)
	if err != nil {
		return nil, false, err
	}
	out := []ConservationWindow{}
	err = s.scanAll("billing_windows", rows, func(r driver.Rows) error {
		var w ConservationWindow
		dests, finish := scanTotals(&w.ConservationTotals)
		if err := r.Scan(append([]any{&w.TenantID, &w.ProductID, &w.Currency, &w.WindowStart}, dests...)...); err != nil {
			return err
		}
		if err := finish(); err != nil {
			return err
		}
		w.WindowStart = w.WindowStart.UTC()
		w.Balanced, w.Conserved = w.Unexplained == 0, w.conserved()
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

// conservationParams are the filters of /v1/billing/conservation.
var conservationParams = []listParam{
	{"tenant", "tenant_id", nil},
	{"product", "product_id", nil},
	{"currency", "currency", nil},
}

func (s *Server) handleConservation(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), billingAliases)
	if err := checkKnown(q, paramNames(conservationParams, "from", "to", "unbalanced", "limit")...); err != nil {
		return err
	}
	conds, args, err := listConds(q, conservationParams)
	if err != nil {
		return err
	}
	for _, b := range []struct{ name, op string }{{"from", ">="}, {"to", "<"}} {
		v, ok := single(q, b.name)
		if !ok {
			if len(q[b.name]) > 0 {
				return &ParamError{Param: b.name, Reason: "give one time"}
			}
			continue
		}
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return &ParamError{Param: b.name, Value: v, Reason: "not an RFC 3339 time"}
		}
		conds = append(conds, "window_start "+b.op+" toDateTime(?)")
		args = append(args, at.Unix())
	}
	unbalanced, err := parseChoice(q, "unbalanced", "false", []string{"false", "true"})
	if err != nil {
		return err
	}
	limit, err := parseInt(q, "limit", DefaultConservationLimit, 1, MaxConservationLimit)
	if err != nil {
		return err
	}
	ws, truncated, err := s.conservationWindows(r.Context(), conds, args, unbalanced == "true", limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ConservationPage{Windows: ws, Count: len(ws), Truncated: truncated})
	return nil
}

// AutomationStoppingKinds are the billing_mismatch kinds whose open rows
// stop financial automation for their tenant and product: the money path
// disagrees or is missing a step. duplicate_usage does not stop it (the
// rater refused the duplicate; the first usage_id is the truth and is
// rated once); it is reported among the reasons.
var AutomationStoppingKinds = contract.Strings([]contract.BillingKind{contract.KindUsageNotRated, contract.KindRatedNotLedgered,
	contract.KindAmountMismatch, contract.KindUnknownUnit, contract.KindWindowUnbalanced})

// Automation is the answer of GET /v1/billing/automation: whether
// financial automation (invoicing, payouts, credits) for a tenant, and
// optionally one product, must stop.
type Automation struct {
	TenantID  string `json:"tenant_id"`
	ProductID string `json:"product_id,omitempty"` // empty: every product of the tenant
	// Stopped is true while an open mismatch of a stopping kind names the
	// tenant (and product), or names no tenant at all (a posting for usage
	// nobody reported: it could be anyone's).
	Stopped bool `json:"stopped"`
	// OpenMismatches counts the open mismatches of stopping kinds behind
	// Stopped; AmountAtRisk sums their amounts at risk per currency.
	OpenMismatches uint64       `json:"open_mismatches"`
	AmountAtRisk   []MoneyRisk  `json:"amount_at_risk"` // by currency; never null
	Reasons        []StopReason `json:"reasons"`        // every open kind, stopping or not; never null
	// Products breaks the answer down per product (only when no product
	// was asked for); never null.
	Products []ProductAutomation `json:"products"`
	// AsOf is the newest updated_at of the billing_mismatch rows read (the
	// reconciler's last write about them); null when there were none.
	AsOf *time.Time `json:"as_of"`
}

// ProductAutomation is the flag of one product of the tenant.
type ProductAutomation struct {
	ProductID      string      `json:"product_id"`
	Stopped        bool        `json:"stopped"`
	OpenMismatches uint64      `json:"open_mismatches"`
	AmountAtRisk   []MoneyRisk `json:"amount_at_risk"`
}

// StopReason is one kind of open mismatch behind (or beside) the flag.
type StopReason struct {
	Kind  string `json:"kind"`
	Stops bool   `json:"stops"` // the kind stops automation
	// Scope is "tenant" for the tenant's own rows, "unattributed" for
	// window_unbalanced rows that name no tenant.
	Scope        string      `json:"scope"`
	Open         uint64      `json:"open"`
	AmountAtRisk []MoneyRisk `json:"amount_at_risk"`
}

// MoneyRisk is an exact amount in one currency.
type MoneyRisk struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

func stops(kind string) bool {
	for _, k := range AutomationStoppingKinds {
		if k == kind {
			return true
		}
	}
	return false
}

func (s *Server) handleAutomation(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), map[string]string{"tenant": "tenant_id", "product": "product_id"})
	if err := allowOnly(q, "tenant_id", "product_id"); err != nil {
		return err
	}
	tenant, ok := single(q, "tenant_id")
	if !ok || tenant == "" {
		return &ParamError{Param: "tenant_id", Reason: "give exactly one tenant_id"}
	}
	product := ""
	if len(q["product_id"]) > 0 {
		if product, ok = single(q, "product_id"); !ok || product == "" {
			return &ParamError{Param: "product_id", Reason: "give at most one non-empty product_id"}
		}
	}
	a, err := s.automation(r.Context(), tenant, product)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// automation reads the open mismatches of tenant (and product) and the
// unattributed unbalanced windows.
func (s *Server) automation(ctx context.Context, tenant, product string) (Automation, error) {
	a := Automation{TenantID: tenant, ProductID: product, AmountAtRisk: []MoneyRisk{}, Reasons: []StopReason{}, Products: []ProductAutomation{}}
	rated, ledger := decSQL("rated_amount"), decSQL("ledger_amount")
	atRisk := fmt.Sprintf("multiIf(kind = '%s', abs(%s - %s), rated_amount != '', %s, %s)", contract.KindAmountMismatch, rated, ledger, rated, ledger)
	conds := []string{"status = '" + string(contract.StatusOpen) + "'", "(tenant_id = ? OR (tenant_id = '' AND kind = '" + string(contract.KindWindowUnbalanced) + "'))"}
	args := []any{tenant}
	if product != "" {
		conds = append(conds, "(product_id = ? OR tenant_id = '')")
		args = append(args, product)
	}
	sql := fmt.Sprintf(`SELECT tenant_id, product_id, kind, currency, count(), toString(sum(%s)),
	toUInt64(max(greatest(%s, %s))), max(updated_at)
	FROM billing_mismatch FINAL%s GROUP BY tenant_id, product_id, kind, currency
	ORDER BY tenant_id, product_id, kind, currency`, atRisk, scaleSQL("rated_amount"), scaleSQL("ledger_amount"), whereClause(conds))
	rows, err := s.readQuery(ctx, "billing_automation", sql, args...)
	if err != nil {
		return a, err
	}
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
	risks := func(x *acc) []MoneyRisk {
		out := []MoneyRisk{}
		for cur, f := range x.risk {
			out = append(out, MoneyRisk{Currency: cur, Amount: f.format(x.scale[cur])})
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
	err = s.scanAll("billing_automation", rows, func(r driver.Rows) error {
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
		a.Reasons = append(a.Reasons, StopReason{Kind: rk.kind, Stops: stops(rk.kind), Scope: rk.scope, Open: x.open, AmountAtRisk: risks(x)})
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
			pa := ProductAutomation{ProductID: prod, OpenMismatches: x.open + unattributed.open}
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

// Automation calls GET /v1/billing/automation with tenant_id (required)
// and product_id in q.
func (c *Client) Automation(ctx context.Context, q url.Values) (*Automation, error) {
	var a Automation
	return &a, c.get(ctx, "/v1/billing/automation", q, &a)
}
