package api

import (
	"encoding/base64"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Filter selects drift findings; the zero Filter selects every finding.
type Filter struct {
	Products         []string
	ResourceFamilies []string
	Classifications  []string
	Severities       []string
	OwningDomains    []string
	DomainIDs        []string
	Providers        []string
	Status           string        // open, resolved, or StatusAll / "" for both
	Age              time.Duration // > 0: first_seen_at at or before now - Age
}

// filterParams maps each filter parameter to its field and allowed values
// (nil: free text).
func (f *Filter) params() []filterParam {
	return []filterParam{
		{"product", &f.Products, nil},
		{"resource_family", &f.ResourceFamilies, contract.Families},
		{"classification", &f.Classifications, classifications},
		{"severity", &f.Severities, severities},
		{"owning_domain", &f.OwningDomains, nil},
		{"domain_id", &f.DomainIDs, nil},
		{"provider", &f.Providers, contract.Providers},
	}
}

type filterParam struct {
	name    string
	dst     *[]string
	allowed []string
}

// columns of the list filters, in filterParams order.
var filterColumns = []string{"product_id", "resource_family", "classification", "severity", "owning_domain", "domain_id", "provider"}

var statusValues = []string{string(contract.StatusOpen), string(contract.StatusResolved), StatusAll}

// paramAliases maps accepted spellings to the canonical parameter.
var paramAliases = map[string]string{"product_id": "product"}

// parseFilter reads the filter parameters of q. extra names further
// parameters the endpoint accepts; any other parameter is refused, so a
// misspelt filter never silently widens an answer.
func parseFilter(q url.Values, extra ...string) (Filter, error) {
	f := Filter{Status: string(contract.StatusOpen)}
	known := map[string]bool{"status": true, "age": true}
	for _, p := range f.params() {
		known[p.name] = true
	}
	for _, e := range extra {
		known[e] = true
	}
	for name := range q {
		canon := name
		if a, ok := paramAliases[name]; ok {
			canon = a
		}
		if !known[canon] {
			allowed := make([]string, 0, len(known))
			for k := range known {
				allowed = append(allowed, k)
			}
			sort.Strings(allowed)
			return f, &ParamError{Param: name, Reason: "unknown parameter", Allowed: allowed}
		}
	}
	for _, p := range f.params() {
		raw := slices.Concat(q[p.name], aliasValues(q, p.name))
		if len(raw) == 0 {
			continue
		}
		vals, err := splitValues(p.name, raw)
		if err != nil {
			return f, err
		}
		if p.allowed != nil {
			for _, v := range vals {
				if !slices.Contains(p.allowed, v) {
					return f, &ParamError{Param: p.name, Value: v, Reason: "unknown value", Allowed: p.allowed}
				}
			}
		}
		*p.dst = vals
	}
	if s, ok := single(q, "status"); ok {
		if !slices.Contains(statusValues, s) {
			return f, &ParamError{Param: "status", Value: s, Reason: "unknown value", Allowed: statusValues}
		}
		f.Status = s
	} else if len(q["status"]) > 1 {
		return f, &ParamError{Param: "status", Reason: "give it once", Allowed: statusValues}
	}
	if s, ok := single(q, "age"); ok {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return f, &ParamError{Param: "age", Value: s, Reason: "must be a Go duration greater than zero, such as 90s, 15m or 2h"}
		}
		f.Age = d
	} else if len(q["age"]) > 1 {
		return f, &ParamError{Param: "age", Reason: "give it once"}
	}
	return f, nil
}

func aliasValues(q url.Values, canon string) []string {
	var out []string
	for a, c := range paramAliases {
		if c == canon {
			out = append(out, q[a]...)
		}
	}
	return out
}

// single returns the one value of a parameter given exactly once.
func single(q url.Values, name string) (string, bool) {
	if v := q[name]; len(v) == 1 {
		return strings.TrimSpace(v[0]), true
	}
	return "", false
}

// splitValues flattens repeated and comma-separated values, refusing empty
// ones: "severity=" most likely means a client bug, not "no filter".
func splitValues(name string, raw []string) ([]string, error) {
	var out []string
	for _, r := range raw {
		for _, v := range strings.Split(r, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				return nil, &ParamError{Param: name, Value: r, Reason: "empty value"}
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// where renders f as SQL conditions over drift_evidence with positional
// arguments. now anchors the age filter.
func (f *Filter) where(now time.Time) (conds []string, args []any) {
	for i, p := range f.params() {
		if len(*p.dst) == 0 {
			continue
		}
		conds = append(conds, inList(filterColumns[i], len(*p.dst)))
		for _, v := range *p.dst {
			args = append(args, v)
		}
	}
	if f.Status == string(contract.StatusOpen) || f.Status == string(contract.StatusResolved) {
		conds = append(conds, "status = ?")
		args = append(args, f.Status)
	}
	if f.Age > 0 {
		// toDateTime of a Unix second works on every ClickHouse version,
		// unlike string literals whose parsing depends on the server zone.
		conds = append(conds, "first_seen_at <= toDateTime(?)")
		args = append(args, now.Add(-f.Age).Unix())
	}
	return conds, args
}

func inList(col string, n int) string {
	if n == 1 {
		return col + " = ?"
	}
	return col + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// Page limits of /v1/drift.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// parseLimit reads limit, default DefaultLimit.
func parseLimit(q url.Values) (int, error) {
	s, ok := single(q, "limit")
	if !ok {
		if len(q["limit"]) > 1 {
			return 0, &ParamError{Param: "limit", Reason: "give it once"}
		}
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, &ParamError{Param: "limit", Value: s, Reason: "must be an integer from 1 to " + strconv.Itoa(MaxLimit)}
	}
	return n, nil
}

// A cursor is the last evidence_id of a page, behind a version tag so the
// encoding can change without old cursors being misread.
const cursorTag = "e1:"

func encodeCursor(lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorTag + lastID))
}

// parseCursor returns the evidence_id after which the page starts, "" for
// the first page.
func parseCursor(q url.Values) (string, error) {
	s, ok := single(q, "cursor")
	if !ok {
		if len(q["cursor"]) > 1 {
			return "", &ParamError{Param: "cursor", Reason: "give it once"}
		}
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), cursorTag) || len(b) == len(cursorTag) {
		return "", &ParamError{Param: "cursor", Value: s, Reason: "not a cursor returned by this API; pass next_cursor unchanged"}
	}
	return string(b[len(cursorTag):]), nil
}
