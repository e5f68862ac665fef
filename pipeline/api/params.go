package api

import (
	"encoding/base64"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// listParam is a filter parameter whose repeated or comma-separated
// values are alternatives, read into dst. allowed nil means free text.
type listParam struct {
	name    string
	dst     *[]string
	allowed []string
}

// checkKnown refuses any parameter of q not in names, listing the known
// ones, so a misspelt filter never silently widens an answer.
func checkKnown(q url.Values, names ...string) error {
	for k := range q {
		if !slices.Contains(names, k) {
			allowed := slices.Clone(names)
			sort.Strings(allowed)
			return &ParamError{Param: k, Reason: "unknown parameter", Allowed: allowed}
		}
	}
	return nil
}

// parseParams rejects the parameters of q other than ps and extra, then
// reads ps.
func parseParams(q url.Values, ps []listParam, extra ...string) error {
	if err := checkKnown(q, paramNames(ps, extra...)...); err != nil {
		return err
	}
	return parseLists(q, ps)
}

// paramNames returns the names of ps followed by extra.
func paramNames(ps []listParam, extra ...string) []string {
	out := make([]string, 0, len(ps)+len(extra))
	for _, p := range ps {
		out = append(out, p.name)
	}
	return append(out, extra...)
}

// parseLists reads the list parameters of q into their destinations,
// checking enumerations.
func parseLists(q url.Values, ps []listParam) error {
	for _, p := range ps {
		if len(q[p.name]) == 0 {
			continue
		}
		vals, err := splitValues(p.name, q[p.name])
		if err != nil {
			return err
		}
		if p.allowed != nil {
			for _, v := range vals {
				if !slices.Contains(p.allowed, v) {
					return &ParamError{Param: p.name, Value: v, Reason: "unknown value", Allowed: p.allowed}
				}
			}
		}
		*p.dst = vals
	}
	return nil
}

// parseChoice reads a parameter given at most once whose value is one of
// allowed; def when absent.
func parseChoice(q url.Values, name, def string, allowed []string) (string, error) {
	s, ok := single(q, name)
	if !ok {
		if len(q[name]) > 1 {
			return "", &ParamError{Param: name, Reason: "give it once", Allowed: allowed}
		}
		return def, nil
	}
	if !slices.Contains(allowed, s) {
		return "", &ParamError{Param: name, Value: s, Reason: "unknown value", Allowed: allowed}
	}
	return s, nil
}

// parseInt reads an integer parameter in [lo, hi]; def when absent.
func parseInt(q url.Values, name string, def, lo, hi int) (int, error) {
	s, ok := single(q, name)
	if !ok {
		if len(q[name]) > 1 {
			return 0, &ParamError{Param: name, Reason: "give it once"}
		}
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, &ParamError{Param: name, Value: s, Reason: "must be an integer from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi)}
	}
	return n, nil
}

// parseDuration reads a Go duration greater than zero; 0 when absent.
func parseDuration(q url.Values, name string) (time.Duration, error) {
	s, ok := single(q, name)
	if !ok {
		if len(q[name]) > 1 {
			return 0, &ParamError{Param: name, Reason: "give it once"}
		}
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, &ParamError{Param: name, Value: s, Reason: "must be a Go duration greater than zero, such as 90s, 15m or 2h"}
	}
	return d, nil
}

// parseDays reads a list of calendar days (YYYY-MM-DD, UTC).
func parseDays(q url.Values, name string) ([]time.Time, error) {
	if len(q[name]) == 0 {
		return nil, nil
	}
	vals, err := splitValues(name, q[name])
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, 0, len(vals))
	for _, v := range vals {
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return nil, &ParamError{Param: name, Value: v, Reason: "must be a day as YYYY-MM-DD (UTC)"}
		}
		out = append(out, d)
	}
	return out, nil
}

// parseSort reads the sort parameter of a listing with orders ss; the
// first is the default.
func parseSort(q url.Values, ss []reader.Sort) (reader.Sort, error) {
	name, err := parseChoice(q, "sort", ss[0].Name, reader.SortNames(ss))
	if err != nil {
		return reader.Sort{}, err
	}
	return reader.FindSort(ss, name), nil
}

// Keyset cursors are "k1:" sort NUL key NUL id, base64url; drift keeps its
// own "e1:" cursors for compatibility.
const keysetTag = "k1:"

func encodeKeyset(k reader.Keyset) string {
	return base64.RawURLEncoding.EncodeToString([]byte(keysetTag + k.Sort + "\x00" +
		strconv.FormatFloat(k.Key, 'g', -1, 64) + "\x00" + k.ID))
}

// parseKeyset reads the cursor parameter for sort order sortName; nil for
// the first page.
func parseKeyset(q url.Values, sortName string) (*reader.Keyset, error) {
	s, ok := single(q, "cursor")
	if !ok {
		if len(q["cursor"]) > 1 {
			return nil, &ParamError{Param: "cursor", Reason: "give it once"}
		}
		return nil, nil
	}
	bad := &ParamError{Param: "cursor", Value: s, Reason: "not a cursor returned by this API; pass next_cursor unchanged"}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), keysetTag) {
		return nil, bad
	}
	parts := strings.SplitN(string(b[len(keysetTag):]), "\x00", 3)
	if len(parts) != 3 || parts[2] == "" {
		return nil, bad
	}
	key, err := strconv.ParseFloat(parts[1], 64)
	if err != nil || math.IsNaN(key) || math.IsInf(key, 0) {
		return nil, bad
	}
	if parts[0] != sortName {
		return nil, &ParamError{Param: "cursor", Value: s, Reason: "the cursor belongs to sort=" + parts[0] + "; keep the sort of the first page"}
	}
	return &reader.Keyset{Sort: parts[0], Key: key, ID: parts[2]}, nil
}

// parseTimeRange sets from and to from the parameters of the same name,
// RFC 3339 times, each optional and given at most once.
func parseTimeRange(q url.Values, from, to *time.Time) error {
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"from", from}, {"to", to}} {
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
		*b.dst = at
	}
	return nil
}
