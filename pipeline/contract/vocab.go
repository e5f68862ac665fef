package contract

// A vocabulary is one of the contract's closed sets of string values: its
// constants beside their type, and one exported list (Families, Healths,
// Actions, ...) that is the table everything else is derived from: the
// validator's check (oneOf, Valid), the allowed-value lists of the query
// API (Strings). A value added to a vocabulary is added to its list, and
// nowhere else.

// Valid reports whether v is one of the values of vocabulary vs. A linear
// scan of a vocabulary's few values costs no more than a switch over them.
func Valid[T ~string](vs []T, v string) bool {
	for _, x := range vs {
		if string(x) == v {
			return true
		}
	}
	return false
}

// Strings returns the values of a vocabulary list as plain strings, for
// the places that take any string (query filters, allowed-value lists).
func Strings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
