package reader

import (
	"fmt"
	"math/big"
	"strings"
)

// Money totals are summed by ClickHouse as Decimal128(38, 18) (18.16 and
// current releases both have it) and folded further here with math/big:
// no float ever carries an amount. Contract amounts are decimal strings
// with at most 18 fractional digits; sumScale is the scale of every sum.
const sumScale = 18

// decimalPattern is what the read model accepts as a contract decimal; any
// other non-empty string is counted as invalid and summed as 0. It has no
// '?' so that client-side argument binding never mistakes it.
const decimalPattern = `^-{0,1}[0-9]{1,20}(\\.[0-9]{1,18}){0,1}$`

// decSQL renders column as Decimal128(38, 18), 0 when empty or invalid.
func decSQL(column string) string {
	return fmt.Sprintf("toDecimal128(if(match(%s, '%s'), %s, '0'), %d)", column, decimalPattern, column, sumScale)
}

// invalidSQL is true for a non-empty value that is not a decimal.
func invalidSQL(column string) string {
	return fmt.Sprintf("(%s != '' AND NOT match(%s, '%s'))", column, column, decimalPattern)
}

// scaleSQL is the number of fractional digits of column.
func scaleSQL(column string) string {
	return fmt.Sprintf("toUInt64(if(position(%s, '.') > 0, length(%s) - position(%s, '.'), 0))", column, column, column)
}

// fixed is an exact decimal: value × 10^-sumScale.
type fixed struct{ v big.Int }

// parseFixed reads a decimal string as ClickHouse prints a Decimal (18.16
// pads to the scale, current releases may trim trailing zeros).
func parseFixed(s string) (fixed, error) {
	var f fixed
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" {
		intPart = "0"
	}
	if len(frac) > sumScale {
		if strings.Trim(frac[sumScale:], "0") != "" {
			return f, fmt.Errorf("decimal %q: more than %d fractional digits", s, sumScale)
		}
		frac = frac[:sumScale]
	}
	frac += strings.Repeat("0", sumScale-len(frac))
	if _, ok := f.v.SetString(intPart+frac, 10); !ok {
		return f, fmt.Errorf("decimal %q: not a number", s)
	}
	if neg {
		f.v.Neg(&f.v)
	}
	return f, nil
}

func (f *fixed) add(g fixed) { f.v.Add(&f.v, &g.v) }

// format prints f with scale fractional digits (0..sumScale), or more
// when f has nonzero digits further right: nothing is ever cut.
func (f fixed) format(scale int) string {
	var abs big.Int
	abs.Abs(&f.v)
	digits := abs.String()
	if len(digits) <= sumScale {
		digits = strings.Repeat("0", sumScale-len(digits)+1) + digits
	}
	intPart, frac := digits[:len(digits)-sumScale], digits[len(digits)-sumScale:]
	scale = max(0, min(sumScale, max(scale, len(strings.TrimRight(frac, "0")))))
	out := intPart
	if scale > 0 {
		out += "." + frac[:scale]
	}
	if f.v.Sign() < 0 {
		out = "-" + out
	}
	return out
}
