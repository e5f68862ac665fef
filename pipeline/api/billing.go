package api

import (
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/export"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// mismatchParams are the list filters of /v1/billing/mismatches, read
// into f.
func mismatchParams(f *reader.MismatchFilter) []listParam {
	return []listParam{
		{"kind", &f.Kinds, apitypes.BillingKinds},
		{"tenant", &f.Tenants, nil},
		{"product", &f.Products, nil},
		{"unit", &f.Units, nil},
		{"currency", &f.Currencies, nil},
		{"metering_source", &f.MeteringSources, nil},
		{"usage_id", &f.UsageIDs, nil},
	}
}

// billingAliases are accepted spellings of billing parameters.
var billingAliases = map[string]string{"tenant_id": "tenant", "product_id": "product", "unit_id": "unit"}

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

// parseMismatchFilter reads the filters shared by the billing listing and
// its totals: the list filters, status, age and day.
func (s *Server) parseMismatchFilter(q url.Values) (reader.MismatchFilter, error) {
	var f reader.MismatchFilter
	if err := parseLists(q, mismatchParams(&f)); err != nil {
		return f, err
	}
	status, err := parseChoice(q, "status", string(contract.StatusOpen), statusValues)
	if err != nil {
		return f, err
	}
	f.Status = status
	age, err := parseDuration(q, "age")
	if err != nil {
		return f, err
	}
	if age > 0 {
		f.FirstSeenBy = s.opts.Now().Add(-age)
	}
	f.Days, err = parseDays(q, "day")
	return f, err
}

func (s *Server) handleBillingMismatches(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), billingAliases)
	if err := checkKnown(q, paramNames(mismatchParams(&reader.MismatchFilter{}), "status", "age", "day", "sort", "limit", "cursor", "format")...); err != nil {
		return err
	}
	f, err := s.parseMismatchFilter(q)
	if err != nil {
		return err
	}
	order, err := parseSort(q, reader.MismatchSorts)
	if err != nil {
		return err
	}
	k, err := parseKeyset(q, order.Name)
	if err != nil {
		return err
	}
	each := func(limit int, fn func(apitypes.BillingMismatch) error) error {
		return s.read.EachMismatch(r.Context(), f, order, k, limit, fn)
	}
	limit, done, err := pageOrExport(s, w, r, q, "billing_mismatches", export.MismatchColumns, each)
	if done || err != nil {
		return err
	}
	page := apitypes.BillingPage{Mismatches: []apitypes.BillingMismatch{}, Sort: order.Name}
	err = each(limit+1, func(m apitypes.BillingMismatch) error {
		page.Mismatches = append(page.Mismatches, m)
		return nil
	})
	if err != nil {
		return err
	}
	if len(page.Mismatches) > limit {
		page.Mismatches = page.Mismatches[:limit]
		page.NextCursor = encodeKeyset(order.MismatchKey(page.Mismatches[limit-1]))
	}
	page.Count = len(page.Mismatches)
	if page.Totals, err = s.read.BillingTotals(r.Context(), f); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// Group limits of /v1/billing/rated.
const (
	DefaultRatedLimit = 1000
	MaxRatedLimit     = 100000
)

func (s *Server) handleRated(w http.ResponseWriter, r *http.Request) error {
	q := canonical(r.URL.Query(), billingAliases)
	var rq reader.RatedQuery
	ps := []listParam{{"tenant", &rq.Tenants, nil}, {"product", &rq.Products, nil}, {"unit", &rq.Units, nil}, {"currency", &rq.Currencies, nil}}
	if err := parseParams(q, ps, "group_by", "day", "from", "to", "limit"); err != nil {
		return err
	}
	rq.GroupBy = slices.Clone(reader.RatedGroups)
	if len(q["group_by"]) > 0 {
		vals, err := splitValues("group_by", q["group_by"])
		if err != nil {
			return err
		}
		for _, v := range vals {
			if !slices.Contains(reader.RatedGroups, v) {
				return &ParamError{Param: "group_by", Value: v, Reason: "unknown value", Allowed: reader.RatedGroups}
			}
		}
		rq.GroupBy = vals
	}
	var err error
	if rq.Days, err = parseDays(q, "day"); err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"from", &rq.From}, {"to", &rq.To}} {
		ds, err := parseDays(q, b.name)
		if err != nil {
			return err
		}
		if len(ds) > 1 {
			return &ParamError{Param: b.name, Reason: "give one day"}
		}
		if len(ds) == 1 {
			*b.dst = ds[0]
		}
	}
	if rq.Limit, err = parseInt(q, "limit", DefaultRatedLimit, 1, MaxRatedLimit); err != nil {
		return err
	}
	out, err := s.read.Rated(r.Context(), rq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
