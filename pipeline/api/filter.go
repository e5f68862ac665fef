package api

import (
	"encoding/base64"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// driftParams maps each list filter of the drift listings to its field
// of f and allowed values (nil: free text).
func driftParams(f *reader.Filter) []listParam {
	return []listParam{
		{"product", &f.Products, nil},
		{"resource_family", &f.ResourceFamilies, contract.Families},
		{"classification", &f.Classifications, apitypes.Classifications},
		{"severity", &f.Severities, apitypes.Severities},
		{"owning_domain", &f.OwningDomains, nil},
		{"domain_id", &f.DomainIDs, nil},
		{"provider", &f.Providers, contract.Providers},
		{"tag", &f.Tags, nil},
	}
}

var statusValues = []string{string(contract.StatusOpen), string(contract.StatusResolved), apitypes.StatusAll}

// paramAliases maps accepted spellings to the canonical parameter.
var paramAliases = map[string]string{"product_id": "product"}

// parseFilter reads the filter parameters of q; now anchors the age
// filter. extra names further parameters the endpoint accepts; any other
// parameter is refused, so a misspelt filter never silently widens an
// answer.
func parseFilter(q url.Values, now time.Time, extra ...string) (reader.Filter, error) {
	f := reader.Filter{Status: string(contract.StatusOpen)}
	ps := driftParams(&f)
	known := map[string]bool{"status": true, "age": true}
	for _, p := range ps {
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
	for _, p := range ps {
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
		f.FirstSeenBy = now.Add(-d)
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

// Page limits of the listings (/v1/drift, /v1/nodes, /v1/audit,
// /v1/billing/conservation, ...).
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// parseLimit reads limit, default DefaultLimit.
func parseLimit(q url.Values) (int, error) {
	return parseInt(q, "limit", DefaultLimit, 1, MaxLimit)
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
