package reader

import (
	"cmp"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// Sort is one order of a listing: by a column, then by the listing's key
// ascending, or by the key alone.
type Sort struct {
	Name   string // the value of the API's sort parameter
	column string // sort key column; "" sorts by the listing's key only
	desc   bool
	// bind renders the sort key's placeholder; the key travels in a
	// Keyset as a float64 (Unix seconds for times, exact for scores).
	bind string
}

// ByKey reports whether s orders by the listing's key alone.
func (s Sort) ByKey() bool { return s.column == "" }

// The orders of each listing; the first is the default.
var (
	DriftSorts = []Sort{
		{Name: "evidence_id"},
		{Name: "attention_score", column: "attention_score", desc: true, bind: "?"},
		{Name: "first_seen_at", column: "first_seen_at", bind: "toDateTime(?)"}, // oldest first
		{Name: "last_seen_at", column: "last_seen_at", desc: true, bind: "toDateTime(?)"},
	}
	NodeSorts = []Sort{
		{Name: "node_id"},
		{Name: "attention_score", column: "attention_score", desc: true, bind: "?"},
		{Name: "last_seen_at", column: "last_seen_at", bind: "toDateTime(?)"}, // longest silent first
	}
	MismatchSorts = []Sort{
		{Name: "mismatch_id"},
		{Name: "first_seen_at", column: "first_seen_at", bind: "toDateTime(?)"}, // oldest first
	}
)

// SortNames returns the names of ss.
func SortNames(ss []Sort) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

// FindSort returns the order of ss named name, which must be one.
func FindSort(ss []Sort, name string) Sort {
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	panic("BUG: unknown sort " + name)
}

// Keyset is the position after the last row of a page: the row's sort key
// and its key (evidence_id, node_id, mismatch_id).
type Keyset struct {
	Sort string // the Sort's name
	Key  float64
	ID   string
}

func (s Sort) orderBy(idCol string) string {
	if s.column == "" {
		return " ORDER BY " + idCol
	}
	return " ORDER BY " + s.keyOrder() + ", " + idCol
}

// after renders the condition selecting rows after k in order s.
func (s Sort) after(k Keyset, idCol string) (string, []any) { return s.side(k, idCol, true) }

// upTo renders the condition selecting the rows at or before k in order s.
func (s Sort) upTo(k Keyset, idCol string) (string, []any) { return s.side(k, idCol, false) }

// side renders the condition selecting the rows after k in order s
// (after) or those at or before it (!after).
func (s Sort) side(k Keyset, idCol string, after bool) (string, []any) {
	idCmp := " <= "
	if after {
		idCmp = " > "
	}
	if s.column == "" {
		return idCol + idCmp + "?", []any{k.ID}
	}
	keyCmp := " < "
	if after != s.desc {
		keyCmp = " > "
	}
	c, b := s.keyCol(), s.bind
	return "(" + c + keyCmp + b + " OR (" + c + " = " + b + " AND " + idCol + idCmp + "?))",
		[]any{s.keyArg(k.Key), s.keyArg(k.Key), k.ID}
}

func (s Sort) keyArg(v float64) any {
	if strings.Contains(s.bind, "toDateTime") {
		return int64(v)
	}
	return v
}

// FindingKey is the position after f in order s.
func (s Sort) FindingKey(f apitypes.Finding) Keyset {
	return s.key(f.EvidenceID, f.AttentionScore, &f.FirstSeenAt, &f.LastSeenAt)
}

// NodeKey is the position after n in order s.
func (s Sort) NodeKey(n apitypes.Node) Keyset {
	return s.key(n.NodeID, n.AttentionScore, nil, n.LastSeenAt)
}

// MismatchKey is the position after m in order s.
func (s Sort) MismatchKey(m apitypes.BillingMismatch) Keyset {
	return s.key(m.MismatchID, 0, &m.FirstSeenAt, nil)
}

// key is the position after the row id whose sort columns hold score,
// firstSeen and lastSeen in order s; a nil time keys as 0.
func (s Sort) key(id string, score float64, firstSeen, lastSeen *time.Time) Keyset {
	k := Keyset{Sort: s.Name, ID: id}
	var at *time.Time
	switch s.column {
	case "attention_score":
		k.Key = score
	case "first_seen_at":
		at = firstSeen
	case "last_seen_at":
		at = lastSeen
	}
	if at != nil {
		k.Key = float64(at.Unix())
	}
	return k
}

// keyCol is the expression s orders by: its column, with a score that is
// not a finite number taken as 0, as the API shows it.
func (s Sort) keyCol() string {
	if s.column == "attention_score" {
		return "if(isFinite(attention_score), attention_score, 0)"
	}
	return s.column
}

// keySelect selects the sort key as a Keyset holds it (a float64: Unix
// seconds for a time), or 0 for an order by the listing's key.
func (s Sort) keySelect() string {
	switch {
	case s.column == "":
		return "toFloat64(0)"
	case s.bind == "?":
		return s.keyCol()
	}
	return "toFloat64(toUInt32(" + s.column + "))"
}

// keyOrder orders by the sort key alone (orderBy adds the key column).
func (s Sort) keyOrder() string {
	if s.desc {
		return s.keyCol() + " DESC"
	}
	return s.keyCol()
}

// atOrBefore is the comparison selecting the sort keys at or before a
// value in order s.
func (s Sort) atOrBefore() string {
	if s.desc {
		return " >= "
	}
	return " <= "
}

// compare orders the positions a and b as s does.
func (s Sort) compare(a, b Keyset) int {
	if s.column != "" {
		c := cmp.Compare(a.Key, b.Key)
		if s.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return strings.Compare(a.ID, b.ID)
}
