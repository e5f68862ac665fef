// Package decimal is the exact fixed-point arithmetic of the money path,
// and the one rule of what a decimal string is. Quantities, unit prices
// and amounts are parsed from contract decimal strings, multiplied,
// rounded half-to-even to a unit's precision, added and compared without
// ever passing through a float.
//
// A contract decimal (CONTRACT section 3: money and quantities are decimal
// strings) is what Parse accepts, and nothing else reads one differently:
// the validator (contract.IsDecimal), the rater, the classifier's quota
// rule and the query API's ClickHouse sums (built from Pattern and
// MaxCoef) all apply this rule. A decimal is
//
//   - an optional '-', one or more ASCII digits, and optionally a '.'
//     followed by 1 to MaxScale (18) digits: no '+', exponent, spaces,
//     leading or trailing point ("12", "-0.5", "0012.500000"; not "+1",
//     "1e3", ".5", "5.", "");
//   - whose coefficient, its digits read as one integer without the point,
//     is at most MaxCoef (2^63-1 = 9223372036854775807). Leading zeros do
//     not count; so every decimal of up to 18 significant digits is one,
//     and one of 19 is when its digits do not exceed 9223372036854775807
//     ("9223372036854775807", "9.223372036854775807" and
//     "1.000000000000000000" are decimals; "10.000000000000000000" and
//     "1.0000000000000000001" are not).
//
// "-0" is zero. Pattern is the first condition as a regular expression.
//
// A Dec is a signed 64-bit coefficient and a decimal scale (0..MaxScale):
// the value coef × 10^-scale. "12.500000" is coefficient 12500000 at scale
// 6; the scale is kept, so formatting gives back the same digits. Products
// are computed in 128 bits before rounding, so quantity × price is exact
// whenever the rounded result fits the coefficient. Anything that does not
// fit is an error (ErrRange, ErrScale), never a silently wrapped or
// truncated number.
//
// The hot path (Parse, MulRound, Append) does not allocate.
package decimal

import "strconv"

// MaxScale is the largest number of fractional digits a Dec holds.
const MaxScale = 18

// MaxCoef is the largest coefficient magnitude of a Dec (2^63-1): the
// largest decimal, its digits read as one integer.
const MaxCoef = 1<<63 - 1

// Pattern is the syntax of a decimal as a regular expression that Go's
// regexp and RE2 (ClickHouse's match) read alike. A string it matches is a
// decimal when its coefficient is also at most MaxCoef. It holds no '?',
// backslash or quote, so that it can stand in SQL text as it is (a '?'
// would be taken for a bound argument).
var Pattern = "^-{0,1}[0-9]+([.][0-9]{1," + strconv.Itoa(MaxScale) + "}){0,1}$"

// Dec is an exact decimal number: Coef() × 10^-Scale(). The zero value is 0
// at scale 0. Two Decs with different scales may be numerically equal
// (1.5 and 1.50); use Cmp or Equal, not ==, to compare values.
type Dec struct {
	coef  int64 // never math.MinInt64, so negation cannot overflow
	scale uint8 // 0..MaxScale
}

// pow10 holds 10^0 .. 10^19 (10^19 < 2^64).
var pow10 = [20]uint64{
	1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
}

// New returns coef × 10^-scale. It panics if scale is outside
// [0, MaxScale] or coef is math.MinInt64: both are programming errors.
func New(coef int64, scale int) Dec {
	if scale < 0 || scale > MaxScale {
		panic("BUG: decimal.New: scale out of range")
	}
	if coef == -MaxCoef-1 {
		panic("BUG: decimal.New: coefficient math.MinInt64")
	}
	return Dec{coef: coef, scale: uint8(scale)}
}

// Coef returns the coefficient.
func (d Dec) Coef() int64 { return d.coef }

// Scale returns the number of fractional digits.
func (d Dec) Scale() int { return int(d.scale) }

// Sign returns -1, 0 or +1.
func (d Dec) Sign() int {
	switch {
	case d.coef < 0:
		return -1
	case d.coef > 0:
		return 1
	}
	return 0
}

// IsZero reports whether d is zero at any scale.
func (d Dec) IsZero() bool { return d.coef == 0 }

// Neg returns -d.
func (d Dec) Neg() Dec { return Dec{coef: -d.coef, scale: d.scale} }

// Abs returns |d|.
func (d Dec) Abs() Dec {
	if d.coef < 0 {
		return d.Neg()
	}
	return d
}

// Parse parses a contract decimal string ("12", "-0.5", "12.500000"), the
// rule of the package doc: an optional minus sign, at least one digit, and
// an optional '.' followed by at least one digit. Exponents, '+', spaces,
// leading or trailing dots are ErrSyntax. More than MaxScale fractional
// digits is ErrScale; a coefficient above MaxCoef is ErrRange. The scale
// of the result is the number of fractional digits written.
func Parse(s string) (Dec, error) {
	var d Dec
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	var c uint64
	digits := 0
	overflow := false
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		c, overflow = accumulate(c, s[i], overflow)
		digits++
	}
	if digits == 0 {
		return d, ErrSyntax
	}
	scale := 0
	if i < len(s) {
		if s[i] != '.' {
			return d, ErrSyntax
		}
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			c, overflow = accumulate(c, s[i], overflow)
			scale++
		}
		if scale == 0 || i != len(s) {
			return d, ErrSyntax
		}
	}
	if scale > MaxScale {
		return d, ErrScale
	}
	if overflow || c > MaxCoef {
		return d, ErrRange
	}
	d.coef, d.scale = int64(c), uint8(scale)
	if neg {
		d.coef = -d.coef
	}
	return d, nil
}

// ParseBytes is Parse of a byte slice; it does not allocate.
func ParseBytes(b []byte) (Dec, error) {
	// The conversion does not allocate: the string does not escape.
	return Parse(string(b))
}

// accumulate appends decimal digit ch to c, flagging 64-bit overflow.
func accumulate(c uint64, ch byte, overflow bool) (uint64, bool) {
	if overflow {
		return c, true
	}
	if c > (1<<64-1)/10 {
		return c, true
	}
	c *= 10
	v := uint64(ch - '0')
	if c > 1<<64-1-v {
		return c, true
	}
	return c + v, false
}

// MustParse is Parse for constants; it panics on error.
func MustParse(s string) Dec {
	d, err := Parse(s)
	if err != nil {
		panic("decimal.MustParse(" + s + "): " + err.Error())
	}
	return d
}

// String formats d with exactly Scale() fractional digits ("12.500000").
func (d Dec) String() string {
	var buf [24]byte
	return string(d.Append(buf[:0]))
}

// Append appends the String form of d to dst.
func (d Dec) Append(dst []byte) []byte {
	var buf [24]byte // 19 digits, sign, point, leading zero
	i := len(buf)
	u := uint64(d.coef)
	if d.coef < 0 {
		u = uint64(-d.coef)
	}
	scale := int(d.scale)
	for n := 0; n < scale; n++ {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
	}
	if scale > 0 {
		i--
		buf[i] = '.'
	}
	for {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if d.coef < 0 {
		i--
		buf[i] = '-'
	}
	return append(dst, buf[i:]...)
}

// MarshalText implements encoding.TextMarshaler (the String form).
func (d Dec) MarshalText() ([]byte, error) { return d.Append(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler (Parse).
func (d *Dec) UnmarshalText(b []byte) error {
	v, err := ParseBytes(b)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
