package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// billingParams are the list filters of /v1/billing/mismatches.
var billingParams = []listParam{
	{"kind", "kind", billingKinds},
	{"tenant", "tenant_id", nil},
	{"product", "product_id", nil},
	{"unit", "unit_id", nil},
	{"currency", "currency", nil},
	{"metering_source", "metering_source", nil},
	{"usage_id", "usage_id", nil},
}

// billingAliases are accepted spellings of billing parameters.
var billingAliases = map[string]string{"tenant_id": "tenant", "product_id": "product", "unit_id": "unit"}

var billingSorts = []sortSpec{
	{name: "mismatch_id"},
	{name: "first_seen_at", column: "first_seen_at", bind: "toDateTime(?)"}, // oldest first
}

// canonical returns q with aliased parameters renamed.
func canonical(q url.Values, aliases map[string]string) url.Values {
	out := url.Values{}
	for k, v := range q {
		if c, ok := aliases[k]; ok {
			k = c
		}
		out[k] = append(out[k], v...)
	}
	return out
}

// billingFilter is a parsed billing filter.
type billingFilter struct {
	conds []string
	args  []any
}

// parseBillingFilter reads the filters shared by the billing listing and
// its totals: the list filters, status, age and day.
func (s *Server) parseBillingFilter(q url.Values) (billingFilter, error) {
	var bf billingFilter
	conds, args, err := listConds(q, billingParams)
	if err != nil {
		return bf, err
	}
	status, err := parseChoice(q, "status", string(contract.StatusOpen), statusValues)
	if err != nil {
		return bf, err
	}
	if status != StatusAll {
		conds = append(conds, "status = ?")
		args = append(args, status)
	}
	age, err := parseDuration(q, "age")
	if err != nil {
		return bf, err
	}
	if age > 0 {
		conds = append(conds, "first_seen_at <= toDateTime(?)")
		args = append(args, s.opts.Now().Add(-age).Unix())
	}
	c, a, err := dayConds(q, "day", "first_seen_at")
	if err != nil {
		return bf, err
	}
	bf.conds, bf.args = append(conds, c...), append(args, a...)
	return bf, nil
}

// dayConds selects rows whose column falls on one of the UTC days of
// parameter name. Ranges of Unix seconds, not toDate, so the server's time
// zone does not matter.
func dayConds(q url.Values, name, column string) ([]string, []any, error) {
	days, err := parseDays(q, name)
	if err != nil || len(days) == 0 {
		return nil, nil, err
	}
	var (
		ors  []string
		args []any
	)
	for _, d := range days {
		ors = append(ors, "("+column+" >= toDateTime(?) AND "+column+" < toDateTime(?))")
		args = append(args, d.Unix(), d.Add(24*time.Hour).Unix())
	}
	return []string{"(" + strings.Join(ors, " OR ") + ")"}, args, nil
}

const mismatchColumns = `mismatch_id, kind, usage_id, metering_source, metering_id, tenant_id, product_id,
	unit_id, quantity, rated_amount, ledger_amount, currency, status, first_seen_at, last_seen_at, version`

func scanMismatch(rows driver.Rows) (BillingMismatch, error) {
	var m BillingMismatch
	err := rows.Scan(&m.MismatchID, &m.Kind, &m.UsageID, &m.MeteringSource, &m.MeteringID, &m.TenantID, &m.ProductID,
		&m.UnitID, &m.Quantity, &m.RatedAmount, &m.LedgerAmount, &m.Currency, &m.Status, &m.FirstSeenAt, &m.LastSeenAt, &m.Version)
	m.FirstSeenAt, m.LastSeenAt = m.FirstSeenAt.UTC(), m.LastSeenAt.UTC()
	m.AmountAtRisk = amountAtRisk(m)
	return m, err
}

// amountAtRisk follows the definition on BillingMismatch.AmountAtRisk with
// exact decimals; an amount that does not parse leaves it empty.
func amountAtRisk(m BillingMismatch) string {
	rated, rerr := decimal.Parse(m.RatedAmount)
	ledger, lerr := decimal.Parse(m.LedgerAmount)
	switch {
	case m.Kind == string(contract.KindAmountMismatch) && rerr == nil && lerr == nil:
		d, err := decimal.Sub(rated, ledger)
		if err != nil {
			return ""
		}
		return d.Abs().String()
	case m.RatedAmount != "":
		if rerr != nil {
			return ""
		}
		return m.RatedAmount
	case m.LedgerAmount != "" && lerr == nil:
		return m.LedgerAmount
	}
	return ""
}

// eachMismatch streams the mismatches under bf in order, after k, at most
// limit (0: all), calling fn as rows arrive.
func (s *Server) eachMismatch(ctx context.Context, bf billingFilter, order sortSpec, k *keyset, limit int, fn func(BillingMismatch) error) error {
	conds, args := slices.Clone(bf.conds), slices.Clone(bf.args)
	if k != nil {
		c, a := order.after(*k, "mismatch_id")
		conds = append(conds, c)
		args = append(args, a...)
	}
	sql := "SELECT " + mismatchColumns + " FROM billing_mismatch FINAL" + whereClause(conds) + order.orderBy("mismatch_id")
	if limit > 0 {
		sql += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.readQuery(ctx, "billing_mismatches", sql, args...)
	if err != nil {
		return err
	}
	return s.scanAll("billing_mismatches", rows, func(r driver.Rows) error {
		m, err := scanMismatch(r)
		if err != nil {
			return err
		}
		return fn(m)
	})
}

func mismatchKey(order sortSpec, m BillingMismatch) keyset {
	k := keyset{sort: order.name, id: m.MismatchID}
	if order.column == "first_seen_at" {
		k.key = float64(m.FirstSeenAt.Unix())
	}
	return k
}

func (s *Server) handleBillingMismatches(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), billingAliases)
	if err := checkKnown(q, paramNames(billingParams, "status", "age", "day", "sort", "limit", "cursor", "format")...); err != nil {
		return err
	}
	bf, err := s.parseBillingFilter(q)
	if err != nil {
		return err
	}
	sortName, err := parseChoice(q, "sort", "mismatch_id", sortNames(billingSorts))
	if err != nil {
		return err
	}
	order := findSort(billingSorts, sortName)
	k, err := parseKeyset(q, sortName)
	if err != nil {
		return err
	}
	format, err := negotiate(r, q)
	if err != nil {
		return err
	}
	if format != formatJSON {
		// Exports are the whole selection unless a limit is given.
		limit := 0
		if len(q["limit"]) > 0 {
			if limit, err = parseLimit(q); err != nil {
				return err
			}
		}
		return s.exportMismatches(w, r, format, bf, order, k, limit)
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	page := BillingPage{Mismatches: []BillingMismatch{}, Sort: sortName}
	err = s.eachMismatch(r.Context(), bf, order, k, limit+1, func(m BillingMismatch) error {
		page.Mismatches = append(page.Mismatches, m)
		return nil
	})
	if err != nil {
		return err
	}
	if len(page.Mismatches) > limit {
		page.Mismatches = page.Mismatches[:limit]
		page.NextCursor = encodeKeyset(mismatchKey(order, page.Mismatches[limit-1]))
	}
	page.Count = len(page.Mismatches)
	if page.Totals, err = s.billingTotals(r.Context(), bf); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// billingTotals sums the mismatches under bf per currency and kind in
// ClickHouse (Decimal128) and per currency here (math/big).
func (s *Server) billingTotals(ctx context.Context, bf billingFilter) (BillingTotals, error) {
	rated, ledger := decSQL("rated_amount"), decSQL("ledger_amount")
	atRisk := fmt.Sprintf("multiIf(kind = '%s', abs(%s - %s), rated_amount != '', %s, %s)", contract.KindAmountMismatch, rated, ledger, rated, ledger)
	sql := fmt.Sprintf(`SELECT currency, kind, count(), toString(sum(%s)), toString(sum(%s)), toString(sum(%s)),
	countIf(rated_amount = '' AND ledger_amount = ''), countIf(%s OR %s), toUInt64(max(greatest(%s, %s)))
	FROM billing_mismatch FINAL%s GROUP BY currency, kind ORDER BY currency, kind`,
		atRisk, rated, ledger, invalidSQL("rated_amount"), invalidSQL("ledger_amount"),
		scaleSQL("rated_amount"), scaleSQL("ledger_amount"), whereClause(bf.conds))
	rows, err := s.readQuery(ctx, "billing_totals", sql, bf.args...)
	if err != nil {
		return BillingTotals{}, err
	}
	type sums struct {
		t                   MoneyTotal
		risk, rated, ledger fixed
		scale               int
	}
	var kinds []*sums
	err = s.scanAll("billing_totals", rows, func(r driver.Rows) error {
		var (
			k                   sums
			risk, rated, ledger string
			scale               uint64
		)
		if err := r.Scan(&k.t.Currency, &k.t.Kind, &k.t.Count, &risk, &rated, &ledger, &k.t.Unpriced, &k.t.Invalid, &scale); err != nil {
			return err
		}
		k.scale = int(scale)
		var err error
		if k.risk, err = parseFixed(risk); err != nil {
			return err
		}
		if k.rated, err = parseFixed(rated); err != nil {
			return err
		}
		if k.ledger, err = parseFixed(ledger); err != nil {
			return err
		}
		kinds = append(kinds, &k)
		return nil
	})
	if err != nil {
		return BillingTotals{}, err
	}
	out := BillingTotals{ByCurrency: []MoneyTotal{}, ByKind: []MoneyTotal{}}
	byCur := map[string]*sums{}
	var curs []string
	finish := func(x *sums) MoneyTotal {
		t := x.t
		t.AmountAtRisk, t.RatedAmount, t.LedgerAmount = x.risk.format(x.scale), x.rated.format(x.scale), x.ledger.format(x.scale)
		return t
	}
	for _, k := range kinds {
		out.Count += k.t.Count
		out.ByKind = append(out.ByKind, finish(k))
		c := byCur[k.t.Currency]
		if c == nil {
			c = &sums{t: MoneyTotal{Currency: k.t.Currency}}
			byCur[k.t.Currency] = c
			curs = append(curs, k.t.Currency)
		}
		c.t.Count += k.t.Count
		c.t.Unpriced += k.t.Unpriced
		c.t.Invalid += k.t.Invalid
		c.risk.add(k.risk)
		c.rated.add(k.rated)
		c.ledger.add(k.ledger)
		c.scale = max(c.scale, k.scale)
	}
	sort.Strings(curs)
	for _, c := range curs {
		out.ByCurrency = append(out.ByCurrency, finish(byCur[c]))
	}
	return out, nil
}

// ratedGroups are the group_by values of /v1/billing/rated and their
// columns.
var ratedGroups = []struct{ name, column string }{
	{"tenant", "tenant_id"}, {"product", "product_id"}, {"unit", "unit_id"}, {"day", "day"},
}

var ratedParams = []listParam{
	{"tenant", "tenant_id", nil},
	{"product", "product_id", nil},
	{"unit", "unit_id", nil},
	{"currency", "currency", nil},
}

// Group limits of /v1/billing/rated.
const (
	DefaultRatedLimit = 1000
	MaxRatedLimit     = 100000
)

func (s *Server) handleRated(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), billingAliases)
	if err := checkKnown(q, paramNames(ratedParams, "group_by", "day", "from", "to", "limit")...); err != nil {
		return err
	}
	conds, args, err := listConds(q, ratedParams)
	if err != nil {
		return err
	}
	var groupBy []string
	if len(q["group_by"]) > 0 {
		vals, err := splitValues("group_by", q["group_by"])
		if err != nil {
			return err
		}
		for _, v := range vals {
			if !slices.ContainsFunc(ratedGroups, func(g struct{ name, column string }) bool { return g.name == v }) {
				return &ParamError{Param: "group_by", Value: v, Reason: "unknown value", Allowed: []string{"tenant", "product", "unit", "day"}}
			}
		}
		groupBy = vals
	} else {
		groupBy = []string{"tenant", "product", "unit", "day"}
	}
	// rated_usage.day is a Date: compared as a 'YYYY-MM-DD' string it means
	// the same day on every server.
	days, err := parseDays(q, "day")
	if err != nil {
		return err
	}
	if len(days) > 0 {
		conds = append(conds, inList("day", len(days)))
		for _, d := range days {
			args = append(args, d.Format(time.DateOnly))
		}
	}
	for _, b := range []struct{ name, op string }{{"from", ">="}, {"to", "<="}} {
		ds, err := parseDays(q, b.name)
		if err != nil {
			return err
		}
		if len(ds) > 1 {
			return &ParamError{Param: b.name, Reason: "give one day"}
		}
		if len(ds) == 1 {
			conds = append(conds, "day "+b.op+" toDate(?)")
			args = append(args, ds[0].Format(time.DateOnly))
		}
	}
	limit, err := parseInt(q, "limit", DefaultRatedLimit, 1, MaxRatedLimit)
	if err != nil {
		return err
	}
	var cols []string
	for _, g := range ratedGroups {
		if slices.Contains(groupBy, g.name) {
			c := g.column
			if c == "day" {
				c = "toString(day)"
			}
			cols = append(cols, c)
		}
	}
	keys := strings.Join(append(slices.Clone(cols), "currency"), ", ")
	sql := fmt.Sprintf(`SELECT %s, count(), toString(sum(%s)), toString(sum(%s)), countIf(%s OR %s),
	toUInt64(max(%s)), toUInt64(max(%s)) FROM rated_usage FINAL%s GROUP BY %s ORDER BY %s LIMIT %d`,
		keys, decSQL("quantity"), decSQL("amount"), invalidSQL("quantity"), invalidSQL("amount"),
		scaleSQL("quantity"), scaleSQL("amount"), whereClause(conds), keys, keys, limit+1)
	rows, err := s.readQuery(r.Context(), "billing_rated", sql, args...)
	if err != nil {
		return err
	}
	out := RatedTotals{GroupBy: groupBy, Totals: []RatedTotal{}}
	err = s.scanAll("billing_rated", rows, func(rs driver.Rows) error {
		var (
			t              RatedTotal
			qty, amt       string
			qScale, aScale uint64
			dest           []any
		)
		for _, g := range ratedGroups {
			if slices.Contains(groupBy, g.name) {
				dest = append(dest, map[string]*string{"tenant": &t.TenantID, "product": &t.ProductID, "unit": &t.UnitID, "day": &t.Day}[g.name])
			}
		}
		dest = append(dest, &t.Currency, &t.Lines, &qty, &amt, &t.Invalid, &qScale, &aScale)
		if err := rs.Scan(dest...); err != nil {
			return err
		}
		qf, err := parseFixed(qty)
		if err != nil {
			return err
		}
		af, err := parseFixed(amt)
		if err != nil {
			return err
		}
		t.Quantity, t.Amount = qf.format(int(qScale)), af.format(int(aScale))
		out.Totals = append(out.Totals, t)
		return nil
	})
	if err != nil {
		return err
	}
	if len(out.Totals) > limit {
		out.Totals, out.Truncated = out.Totals[:limit], true
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
