package reader

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// Money totals are summed by ClickHouse as Decimal128(38, 18) (18.16 and
// current releases both have it) and folded further here with math/big:
// no float ever carries an amount. A contract decimal has at most
// decimal.MaxScale (18) fractional digits and at most 19 significant
// digits, so it fits; sumScale is the scale of every sum.
const sumScale = decimal.MaxScale

// maxCoef is decimal.MaxCoef's digits: a decimal's coefficient, its digits
// without sign, point and leading zeros, compares with it as a string
// when both have as many digits.
var maxCoef = strconv.FormatInt(decimal.MaxCoef, 10)

// validSQL is true when column holds a contract decimal by the rule of
// package decimal (decimal.Pattern, and a coefficient of at most
// decimal.MaxCoef): the read model sums exactly the strings the validator
// and the rater accept. Any other non-empty string is counted as invalid
// and summed as 0. decimal.Pattern has no '?' (which client-side argument
// binding would take for an argument) and needs no escaping in SQL.
func validSQL(column string) string {
	coef := fmt.Sprintf("replaceRegexpOne(replaceOne(replaceOne(%s, '-', ''), '.', ''), '^0+', '')", column)
	return fmt.Sprintf("(match(%s, '%s') AND (length(%s) < %d OR (length(%s) = %d AND %s <= '%s')))",
		column, decimal.Pattern, coef, len(maxCoef), coef, len(maxCoef), coef, maxCoef)
}

// decSQL renders column as Decimal128(38, 18), 0 when empty or invalid.
func decSQL(column string) string {
	return fmt.Sprintf("toDecimal128(if(%s, %s, '0'), %d)", validSQL(column), column, sumScale)
}

// invalidSQL is true for a non-empty value that is not a decimal.
func invalidSQL(column string) string {
	return fmt.Sprintf("(%s != '' AND NOT %s)", column, validSQL(column))
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
