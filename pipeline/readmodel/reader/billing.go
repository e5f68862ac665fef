package reader

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

const mismatchColumns = `mismatch_id, kind, usage_id, metering_source, metering_id, tenant_id, product_id,
	unit_id, quantity, conflict_quantity, rated_amount, ledger_amount, currency, status, first_seen_at, last_seen_at, version`

func scanMismatch(rows driver.Rows) (apitypes.BillingMismatch, error) {
	var m apitypes.BillingMismatch
	err := rows.Scan(&m.MismatchID, &m.Kind, &m.UsageID, &m.MeteringSource, &m.MeteringID, &m.TenantID, &m.ProductID,
		&m.UnitID, &m.Quantity, &m.ConflictQuantity, &m.RatedAmount, &m.LedgerAmount, &m.Currency, &m.Status, &m.FirstSeenAt, &m.LastSeenAt, &m.Version)
	m.FirstSeenAt, m.LastSeenAt = m.FirstSeenAt.UTC(), m.LastSeenAt.UTC()
	m.AmountAtRisk = amountAtRisk(m)
	return m, err
}

// amountAtRisk follows the definition on BillingMismatch.AmountAtRisk with
// exact decimals; an amount that does not parse leaves it empty.
func amountAtRisk(m apitypes.BillingMismatch) string {
	rated, rerr := decimal.Parse(m.RatedAmount)
	ledger, lerr := decimal.Parse(m.LedgerAmount)
	switch {
	case m.Kind == "amount_mismatch" && rerr == nil && lerr == nil:
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

// EachMismatch streams the current mismatches matching f after the
// position after, in order, at most limit (0: all), calling fn as rows
// arrive.
func (rd *Reader) EachMismatch(ctx context.Context, f MismatchFilter, order Sort, after *Keyset, limit int, fn func(apitypes.BillingMismatch) error) error {
	conds, args := f.where()
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	sql, args := listSQL(mismatchColumns, "billing_mismatch", "mismatch_id", conds, args, order, after, limit)
	return eachRow(ctx, rd, "billing_mismatches", sql, args, scanMismatch, fn)
}

// BillingTotals sums the current mismatches matching f per currency and
// kind in ClickHouse (Decimal128) and per currency here (math/big).
func (rd *Reader) BillingTotals(ctx context.Context, f MismatchFilter) (apitypes.BillingTotals, error) {
	conds, args := f.where()
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	rated, ledger := decSQL("rated_amount"), decSQL("ledger_amount")
	atRisk := fmt.Sprintf("multiIf(kind = 'amount_mismatch', abs(%s - %s), rated_amount != '', %s, %s)", rated, ledger, rated, ledger)
	sql := fmt.Sprintf(`SELECT currency, kind, count(), toString(sum(%s)), toString(sum(%s)), toString(sum(%s)),
	countIf(rated_amount = '' AND ledger_amount = ''), countIf(%s OR %s), toUInt64(max(greatest(%s, %s)))
	FROM billing_mismatch FINAL%s GROUP BY currency, kind ORDER BY currency, kind`,
		atRisk, rated, ledger, invalidSQL("rated_amount"), invalidSQL("ledger_amount"),
		scaleSQL("rated_amount"), scaleSQL("ledger_amount"), whereClause(conds))
	type sums struct {
		t                   apitypes.MoneyTotal
		risk, rated, ledger fixed
		scale               int
	}
	var kinds []*sums
	err := rd.each(ctx, "billing_totals", sql, args, func(r driver.Rows) error {
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
		return apitypes.BillingTotals{}, err
	}
	out := apitypes.BillingTotals{ByCurrency: []apitypes.MoneyTotal{}, ByKind: []apitypes.MoneyTotal{}}
	byCur := map[string]*sums{}
	var curs []string
	finish := func(x *sums) apitypes.MoneyTotal {
		t := x.t
		t.AmountAtRisk, t.RatedAmount, t.LedgerAmount = x.risk.format(x.scale), x.rated.format(x.scale), x.ledger.format(x.scale)
		return t
	}
	for _, k := range kinds {
		out.Count += k.t.Count
		out.ByKind = append(out.ByKind, finish(k))
		c := byCur[k.t.Currency]
		if c == nil {
			c = &sums{t: apitypes.MoneyTotal{Currency: k.t.Currency}}
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

// RatedGroups are the columns rated totals can be grouped by, in the
// order of the answer's columns.
var RatedGroups = []string{"tenant", "product", "unit", "day"}

var ratedColumns = map[string]string{"tenant": "tenant_id", "product": "product_id", "unit": "unit_id", "day": "day"}

// RatedQuery selects and groups rated lines (rated_usage).
type RatedQuery struct {
	Tenants    []string
	Products   []string
	Units      []string
	Currencies []string
	Days       []time.Time // UTC days
	From, To   time.Time   // inclusive days; zero: unbounded
	// GroupBy holds values of RatedGroups; lines are always grouped by
	// currency too.
	GroupBy []string
	// Limit bounds the groups; RatedTotals.Truncated says more exist.
	Limit int
}

// Rated sums the rated lines q selects, one line per usage_id, by the
// groups of q.GroupBy and currency.
func (rd *Reader) Rated(ctx context.Context, q RatedQuery) (apitypes.RatedTotals, error) {
	conds, args := listWhere([]listColumn{
		{"tenant_id", q.Tenants},
		{"product_id", q.Products},
		{"unit_id", q.Units},
		{"currency", q.Currencies},
	})
	// rated_usage.day is a Date: compared as a 'YYYY-MM-DD' string it means
	// the same day on every server.
	if len(q.Days) > 0 {
		conds = append(conds, inList("day", len(q.Days)))
		for _, d := range q.Days {
			args = append(args, dateOnly(d))
		}
	}
	if !q.From.IsZero() {
		conds = append(conds, "day >= toDate(?)")
		args = append(args, dateOnly(q.From))
	}
	if !q.To.IsZero() {
		conds = append(conds, "day <= toDate(?)")
		args = append(args, dateOnly(q.To))
	}
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	var cols []string
	for _, g := range RatedGroups {
		if slices.Contains(q.GroupBy, g) {
			c := ratedColumns[g]
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
		scaleSQL("quantity"), scaleSQL("amount"), whereClause(conds), keys, keys, q.Limit+1)
	out := apitypes.RatedTotals{GroupBy: q.GroupBy, Totals: []apitypes.RatedTotal{}}
	err := rd.each(ctx, "billing_rated", sql, args, func(rs driver.Rows) error {
		var (
			t              apitypes.RatedTotal
			qty, amt       string
			qScale, aScale uint64
			dest           []any
		)
		for _, g := range RatedGroups {
			if slices.Contains(q.GroupBy, g) {
				dest = append(dest, map[string]*string{"tenant": &t.TenantID, "product": &t.ProductID, "unit": &t.UnitID, "day": &t.Day}[g])
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
		return apitypes.RatedTotals{}, err
	}
	if len(out.Totals) > q.Limit {
		out.Totals, out.Truncated = out.Totals[:q.Limit], true
	}
	return out, nil
}
