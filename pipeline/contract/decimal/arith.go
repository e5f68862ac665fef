package decimal

import (
	"cmp"
	"math/bits"
)

// u128 is an unsigned 128-bit magnitude.
type u128 struct{ hi, lo uint64 }

func abs64(c int64) uint64 {
	if c < 0 {
		return uint64(-c)
	}
	return uint64(c)
}

// mulPow10 returns m × 10^k, and false if it does not fit 128 bits.
func (m u128) mulPow10(k int) (u128, bool) {
	for k > 0 {
		step := min(k, 19)
		k -= step
		p := pow10[step]
		hh, hl := bits.Mul64(m.hi, p)
		lh, ll := bits.Mul64(m.lo, p)
		if hh != 0 {
			return u128{}, false
		}
		hi, carry := bits.Add64(hl, lh, 0)
		if carry != 0 {
			return u128{}, false
		}
		m = u128{hi, ll}
	}
	return m, true
}

// divPow10 returns m / 10^k (k <= 19) and the remainder.
func (m u128) divPow10(k int) (q u128, rem uint64) {
	d := pow10[k]
	q.hi = m.hi / d
	r := m.hi % d
	q.lo, rem = bits.Div64(r, m.lo, d)
	return q, rem
}

// roundHalfEven divides m by 10^k (k >= 0), rounding half to even.
func (m u128) roundHalfEven(k int) u128 {
	if k == 0 {
		return m
	}
	// Divide by 10^(k-1), remembering whether anything nonzero was
	// dropped; the last digit then decides.
	sticky := false
	for k > 1 {
		step := min(k-1, 19)
		k -= step
		var rem uint64
		m, rem = m.divPow10(step)
		sticky = sticky || rem != 0
	}
	q, last := m.divPow10(1)
	if last > 5 || last == 5 && (sticky || q.lo&1 == 1) {
		var c uint64
		q.lo, c = bits.Add64(q.lo, 1, 0)
		q.hi += c
	}
	return q
}

// toDec converts a magnitude and sign at scale to a Dec, or ErrRange.
func toDec(m u128, neg bool, scale int) (Dec, error) {
	if m.hi != 0 || m.lo > MaxCoef {
		return Dec{}, ErrRange
	}
	c := int64(m.lo)
	if neg {
		c = -c
	}
	return Dec{coef: c, scale: uint8(scale)}, nil
}

// MulRound returns a × b rounded half-to-even to precision fractional
// digits: the rating rule amount = quantity × unit_price (CONTRACT 3.5).
// The product is exact in 128 bits before rounding; ErrRange if the
// rounded result does not fit, ErrScale if precision is outside
// [0, MaxScale]. It does not allocate.
func MulRound(a, b Dec, precision int) (Dec, error) {
	if precision < 0 || precision > MaxScale {
		return Dec{}, ErrScale
	}
	hi, lo := bits.Mul64(abs64(a.coef), abs64(b.coef))
	m := u128{hi, lo}
	neg := (a.coef < 0) != (b.coef < 0)
	s := int(a.scale) + int(b.scale)
	if s >= precision {
		m = m.roundHalfEven(s - precision)
	} else {
		var ok bool
		if m, ok = m.mulPow10(precision - s); !ok {
			return Dec{}, ErrRange
		}
	}
	return toDec(m, neg && (m.hi|m.lo) != 0, precision)
}

// Mul returns the exact product a × b at scale a.Scale()+b.Scale(), or
// ErrScale / ErrRange if it cannot be held exactly.
func Mul(a, b Dec) (Dec, error) {
	s := int(a.scale) + int(b.scale)
	if s > MaxScale {
		return Dec{}, ErrScale
	}
	return MulRound(a, b, s)
}

// Round returns d rounded half-to-even to precision fractional digits. A
// precision above d's scale pads with zeros (ErrRange if that overflows).
func (d Dec) Round(precision int) (Dec, error) {
	return MulRound(d, Dec{coef: 1}, precision)
}

// Rescale returns d at exactly scale fractional digits, failing with
// ErrScale if that would drop nonzero digits (use Round to round).
func (d Dec) Rescale(scale int) (Dec, error) {
	r, err := d.Round(scale)
	if err != nil {
		return Dec{}, err
	}
	if scale < int(d.scale) && Cmp(r, d) != 0 {
		return Dec{}, ErrScale
	}
	return r, nil
}

// Add returns a + b exactly at the larger of the two scales, or ErrRange.
func Add(a, b Dec) (Dec, error) {
	s := max(a.scale, b.scale)
	ac, ok1 := upscale(a.coef, int(s-a.scale))
	bc, ok2 := upscale(b.coef, int(s-b.scale))
	if !ok1 || !ok2 {
		return Dec{}, ErrRange
	}
	sum, overflow := add64(ac, bc)
	if overflow {
		return Dec{}, ErrRange
	}
	return Dec{coef: sum, scale: s}, nil
}

// Sub returns a - b exactly (Add of -b).
func Sub(a, b Dec) (Dec, error) { return Add(a, b.Neg()) }

// upscale returns c × 10^k, and false if it leaves the coefficient range.
func upscale(c int64, k int) (int64, bool) {
	if k == 0 {
		return c, true
	}
	hi, lo := bits.Mul64(abs64(c), pow10[k])
	if hi != 0 || lo > MaxCoef {
		return 0, false
	}
	if c < 0 {
		return -int64(lo), true
	}
	return int64(lo), true
}

// add64 adds within (-2^63, 2^63), reporting overflow.
func add64(a, b int64) (int64, bool) {
	s := a + b
	if (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0) || s == -MaxCoef-1 {
		return 0, true
	}
	return s, false
}

// Cmp compares a and b numerically, whatever their scales: -1 if a < b, 0
// if equal, +1 if a > b.
func Cmp(a, b Dec) int {
	sa, sb := a.Sign(), b.Sign()
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	s := max(a.scale, b.scale)
	ma, _ := u128{0, abs64(a.coef)}.mulPow10(int(s - a.scale)) // < 2^63 × 10^18 fits
	mb, _ := u128{0, abs64(b.coef)}.mulPow10(int(s - b.scale))
	c := 0
	switch {
	case ma.hi != mb.hi:
		c = cmp.Compare(ma.hi, mb.hi)
	default:
		c = cmp.Compare(ma.lo, mb.lo)
	}
	return c * sa
}

// Equal reports whether a and b are numerically equal (1.5 equals 1.50).
func Equal(a, b Dec) bool { return Cmp(a, b) == 0 }
