package classify

import "strings"

// compareDecimal compares two decimal strings (as accepted by
// event.IsDecimal) exactly, returning -1, 0 or +1.
func compareDecimal(a, b string) int {
	sa, ai, af := splitDecimal(a)
	sb, bi, bf := splitDecimal(b)
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	mag := 0
	switch {
	case len(ai) != len(bi):
		mag = 1
		if len(ai) < len(bi) {
			mag = -1
		}
	case ai != bi:
		mag = strings.Compare(ai, bi)
	default:
		mag = compareFraction(af, bf)
	}
	return sa * mag
}

// splitDecimal returns the sign (-1, 0, +1) and the integer and fraction
// digits of s without insignificant zeros.
func splitDecimal(s string) (sign int, intPart, frac string) {
	neg := strings.HasPrefix(s, "-")
	intPart, frac, _ = strings.Cut(strings.TrimPrefix(s, "-"), ".")
	intPart, frac = strings.TrimLeft(intPart, "0"), strings.TrimRight(frac, "0")
	switch {
	case intPart == "" && frac == "":
		return 0, "", ""
	case neg:
		return -1, intPart, frac
	}
	return 1, intPart, frac
}

// compareFraction compares two fraction digit strings as if the shorter
// were padded with zeros (trailing zeros are already trimmed), without
// allocating.
func compareFraction(a, b string) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	switch {
	case len(a) > n:
		return 1 // a has more significant (non-zero-ending) digits
	case len(b) > n:
		return -1
	}
	return 0
}
