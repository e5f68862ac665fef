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
)

// listParam is a filter parameter over one column: repeated or
// comma-separated values are alternatives. allowed nil means free text.
type listParam struct {
	name, column string
	allowed      []string
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

// paramNames returns the names of ps followed by extra.
func paramNames(ps []listParam, extra ...string) []string {
	out := make([]string, 0, len(ps)+len(extra))
	for _, p := range ps {
		out = append(out, p.name)
	}
	return append(out, extra...)
}

// listConds renders the list parameters of q as SQL conditions.
func listConds(q url.Values, ps []listParam) (conds []string, args []any, err error) {
	for _, p := range ps {
		if len(q[p.name]) == 0 {
			continue
		}
		vals, err := splitValues(p.name, q[p.name])
		if err != nil {
			return nil, nil, err
		}
		if p.allowed != nil {
			for _, v := range vals {
				if !slices.Contains(p.allowed, v) {
					return nil, nil, &ParamError{Param: p.name, Value: v, Reason: "unknown value", Allowed: p.allowed}
				}
			}
		}
		conds = append(conds, inList(p.column, len(vals)))
		for _, v := range vals {
			args = append(args, v)
		}
	}
	return conds, args, nil
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

// sortSpec is one sort order of a listing: by column (then by the id
// column, ascending) or by the id column alone (column "").
type sortSpec struct {
	name   string // the sort parameter's value
	column string // sort key column; "" sorts by id only
	desc   bool
	// bind renders the key placeholder; the key travels in the cursor as a
	// float64 (Unix seconds for times, exact for scores).
	bind string
}

func (s sortSpec) orderBy(idCol string) string {
	if s.column == "" {
		return " ORDER BY " + idCol
	}
	dir := ""
	if s.desc {
		dir = " DESC"
	}
	return " ORDER BY " + s.column + dir + ", " + idCol
}

// keyset is the position after the last row of a page.
type keyset struct {
	sort string
	key  float64
	id   string
}

// after renders the condition selecting rows after k in order s.
func (s sortSpec) after(k keyset, idCol string) (string, []any) {
	if s.column == "" {
		return idCol + " > ?", []any{k.id}
	}
	cmp := " > "
	if s.desc {
		cmp = " < "
	}
	b := s.bind
	return "(" + s.column + cmp + b + " OR (" + s.column + " = " + b + " AND " + idCol + " > ?))",
		[]any{s.keyArg(k.key), s.keyArg(k.key), k.id}
}

func (s sortSpec) keyArg(v float64) any {
	if strings.Contains(s.bind, "toDateTime") {
		return int64(v)
	}
	return v
}

// Keyset cursors are "k1:" sort NUL key NUL id, base64url; drift keeps its
// own "e1:" cursors for compatibility.
const keysetTag = "k1:"

func encodeKeyset(k keyset) string {
	return base64.RawURLEncoding.EncodeToString([]byte(keysetTag + k.sort + "\x00" +
		strconv.FormatFloat(k.key, 'g', -1, 64) + "\x00" + k.id))
}

// parseKeyset reads the cursor parameter for sort order sortName; nil for
// the first page.
func parseKeyset(q url.Values, sortName string) (*keyset, error) {
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
	return &keyset{sort: parts[0], key: key, id: parts[2]}, nil
}

// finite maps NaN and infinities, which JSON cannot carry, to 0.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
