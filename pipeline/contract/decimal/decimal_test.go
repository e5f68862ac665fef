package decimal

import (
	"errors"
	"math/big"
	"testing"
)

func TestParseFormat(t *testing.T) {
	f := func(in, want string, coef int64, scale int) {
		t.Helper()
		d, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if d.Coef() != coef || d.Scale() != scale {
			t.Fatalf("Parse(%q) = %d×10^-%d, want %d×10^-%d", in, d.Coef(), d.Scale(), coef, scale)
		}
		if got := d.String(); got != want {
			t.Fatalf("Parse(%q).String() = %q, want %q", in, got, want)
		}
	}
	f("0", "0", 0, 0)
	f("-0", "0", 0, 0)
	f("-0.00", "0.00", 0, 2)
	f("12.500000", "12.500000", 12500000, 6)
	f("0012.5", "12.5", 125, 1)
	f("-3.1", "-3.1", -31, 1)
	f("0.000001", "0.000001", 1, 6)
	f("9223372036854775807", "9223372036854775807", 9223372036854775807, 0)
	f("-9.223372036854775807", "-9.223372036854775807", -9223372036854775807, 18)
	f("0.000000000000000001", "0.000000000000000001", 1, 18)
}

func TestParseErrors(t *testing.T) {
	f := func(in string, want error) {
		t.Helper()
		if _, err := Parse(in); !errors.Is(err, want) {
			t.Fatalf("Parse(%q) error = %v, want %v", in, err, want)
		}
	}
	for _, s := range []string{"", "-", ".5", "5.", "+1", "1e3", "1E3", "NaN", "Inf", "1.2.3", "--1", " 1", "1 ", "1,5", "0x10", "١"} {
		f(s, ErrSyntax)
	}
	f("0.0000000000000000001", ErrScale)
	f("9223372036854775808", ErrRange)
	f("-9223372036854775808", ErrRange) // MinInt64 is excluded on purpose
	f("99999999999999999999999", ErrRange)
	f("18446744073709551616", ErrRange) // wraps uint64 exactly
}

func TestMulRoundHalfEven(t *testing.T) {
	f := func(a, b string, prec int, want string) {
		t.Helper()
		got, err := MulRound(MustParse(a), MustParse(b), prec)
		if err != nil {
			t.Fatalf("MulRound(%s, %s, %d): %v", a, b, prec, err)
		}
		if got.String() != want {
			t.Fatalf("MulRound(%s, %s, %d) = %s, want %s", a, b, prec, got, want)
		}
	}
	// Ties go to the even neighbour.
	f("0.125", "1", 2, "0.12")
	f("0.135", "1", 2, "0.14")
	f("0.145", "1", 2, "0.14")
	f("-0.125", "1", 2, "-0.12")
	f("-0.135", "1", 2, "-0.14")
	f("2.5", "1", 0, "2")
	f("3.5", "1", 0, "4")
	f("-2.5", "1", 0, "-2")
	// Just above or below a tie is not a tie.
	f("0.1250000001", "1", 2, "0.13")
	f("0.1249999999", "1", 2, "0.12")
	f("0.12500000000000001", "1", 2, "0.13") // the sticky digit is far away
	// Rating examples from the default price book.
	f("3.000000", "2.450000", 2, "7.35")
	f("0.333333", "2.450000", 2, "0.82")   // 0.81666585
	f("0.005", "1.000000", 2, "0.00")      // tie, 0 is even
	f("0.015", "1.000000", 2, "0.02")      // tie, 2 is even
	f("1.234567", "0.042500", 4, "0.0525") // 0.05246909...
	f("1000.000000", "0.000139", 6, "0.139000")
	f("4999.000000", "0.002000", 6, "9.998000")
	// Negative results, zero, and rounding to zero keeps no minus sign.
	f("-1.5", "2", 1, "-3.0")
	f("-0.001", "0.4", 2, "0.00")
	f("0", "2.45", 2, "0.00")
	// Padding to a larger precision.
	f("2", "3", 4, "6.0000")
	// Intermediate product beyond 64 bits is still exact.
	f("123456789.123456", "98765.432109", 2, "12193263124567.82") // 12193263124567.823187448704
	f("9223372036.854775807", "1.000000000", 6, "9223372036.854776")
}

func TestMulRoundErrors(t *testing.T) {
	if _, err := MulRound(MustParse("9223372036854775807"), MustParse("2"), 0); !errors.Is(err, ErrRange) {
		t.Fatalf("overflow: %v", err)
	}
	if _, err := MulRound(MustParse("1"), MustParse("1"), 19); !errors.Is(err, ErrScale) {
		t.Fatalf("precision 19: %v", err)
	}
	if _, err := MulRound(MustParse("1"), MustParse("1"), -1); !errors.Is(err, ErrScale) {
		t.Fatalf("precision -1: %v", err)
	}
	if _, err := MulRound(MustParse("92233720368547758.07"), MustParse("1"), 18); !errors.Is(err, ErrRange) {
		t.Fatalf("padding overflow: %v", err)
	}
	if _, err := Mul(MustParse("0.0000000001"), MustParse("0.0000000001")); !errors.Is(err, ErrScale) {
		t.Fatalf("exact product beyond MaxScale: %v", err)
	}
}

func TestAddCmp(t *testing.T) {
	add := func(a, b, want string) {
		t.Helper()
		got, err := Add(MustParse(a), MustParse(b))
		if err != nil || got.String() != want {
			t.Fatalf("Add(%s, %s) = %s, %v; want %s", a, b, got, err, want)
		}
	}
	add("1.5", "2.25", "3.75")
	add("-1.5", "1.50", "0.00")
	add("0.000001", "12", "12.000001")
	add("9223372036854775806", "1", "9223372036854775807")
	if _, err := Add(MustParse("9223372036854775807"), MustParse("1")); !errors.Is(err, ErrRange) {
		t.Fatalf("Add overflow: %v", err)
	}
	if _, err := Add(MustParse("-9223372036854775807"), MustParse("-1")); !errors.Is(err, ErrRange) {
		t.Fatalf("Add to MinInt64: %v", err)
	}
	if _, err := Add(MustParse("92233720368547759"), MustParse("0.01")); !errors.Is(err, ErrRange) {
		t.Fatalf("Add rescale overflow: %v", err)
	}
	if got, _ := Sub(MustParse("10"), MustParse("0.01")); got.String() != "9.99" {
		t.Fatalf("Sub = %s", got)
	}

	cmp := func(a, b string, want int) {
		t.Helper()
		if got := Cmp(MustParse(a), MustParse(b)); got != want {
			t.Fatalf("Cmp(%s, %s) = %d, want %d", a, b, got, want)
		}
	}
	cmp("1.5", "1.50", 0)
	cmp("0", "-0.000", 0)
	cmp("1.5", "1.49999", 1)
	cmp("-1.5", "-1.49999", -1)
	cmp("-1", "1", -1)
	cmp("9223372036854775807", "0.000000000000000001", 1)
	cmp("9.223372036854775807", "9.223372036854775806", 1)
	cmp("922337203685477580.7", "9223372036854775807", -1)
	if !Equal(MustParse("2.450000"), MustParse("2.45")) {
		t.Fatal("Equal(2.450000, 2.45) = false")
	}
}

func TestRoundRescale(t *testing.T) {
	if r, err := MustParse("7.345").Round(2); err != nil || r.String() != "7.34" {
		t.Fatalf("Round = %s, %v", r, err)
	}
	if r, err := MustParse("7.3").Rescale(6); err != nil || r.String() != "7.300000" {
		t.Fatalf("Rescale up = %s, %v", r, err)
	}
	if r, err := MustParse("7.300000").Rescale(1); err != nil || r.String() != "7.3" {
		t.Fatalf("Rescale down = %s, %v", r, err)
	}
	if _, err := MustParse("7.35").Rescale(1); !errors.Is(err, ErrScale) {
		t.Fatalf("lossy Rescale: %v", err)
	}
}

func TestTextRoundTrip(t *testing.T) {
	var d Dec
	if err := d.UnmarshalText([]byte("-12.040")); err != nil {
		t.Fatal(err)
	}
	b, _ := d.MarshalText()
	if string(b) != "-12.040" {
		t.Fatalf("MarshalText = %s", b)
	}
	if err := d.UnmarshalText([]byte("1e3")); !errors.Is(err, ErrSyntax) {
		t.Fatalf("UnmarshalText(1e3) = %v", err)
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	q, p := []byte("1.234567"), MustParse("0.042500")
	buf := make([]byte, 0, 32)
	allocs := testing.AllocsPerRun(1000, func() {
		d, err := ParseBytes(q)
		if err != nil {
			t.Fatal(err)
		}
		a, err := MulRound(d, p, 4)
		if err != nil {
			t.Fatal(err)
		}
		buf = a.Append(buf[:0])
		_ = Cmp(a, d)
		_, _ = Add(a, d)
	})
	if allocs != 0 {
		t.Fatalf("hot path allocates %.1f times per event", allocs)
	}
}

// rat returns d as an exact big.Rat (the reference the fuzz targets compare
// against).
func rat(d Dec) *big.Rat {
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)
	return new(big.Rat).SetFrac(big.NewInt(d.Coef()), den)
}

// roundRef rounds r half-to-even to prec fractional digits with big.Int.
func roundRef(r *big.Rat, prec int) *big.Rat {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(scale))
	num, den := x.Num(), x.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int)) // truncates toward zero
	twice := new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2))
	switch c := twice.Cmp(den); {
	case c > 0, c == 0 && q.Bit(0) == 1:
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return new(big.Rat).SetFrac(q, scale)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "-0.5", "12.500000", "9223372036854775807", "1e3", ".5", "0.000000000000000001", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		// What parses is a contract decimal and formats back to a value
		// equal to the input, at the same scale.
		want, ok := new(big.Rat).SetString(s)
		if !ok || want.Cmp(rat(d)) != 0 {
			t.Fatalf("Parse(%q) = %s, want %v", s, d, want)
		}
		back, err := Parse(d.String())
		if err != nil || back != d {
			t.Fatalf("round trip of %q: %s -> %v, %v", s, d, back, err)
		}
	})
}

func FuzzArith(f *testing.F) {
	f.Add(int64(125), uint8(3), int64(1), uint8(0), uint8(2))
	f.Add(int64(-9223372036854775807), uint8(18), int64(9223372036854775807), uint8(9), uint8(6))
	f.Add(int64(333333), uint8(6), int64(2450000), uint8(6), uint8(2))
	f.Fuzz(func(t *testing.T, ac int64, as uint8, bc int64, bs uint8, prec uint8) {
		if ac == -MaxCoef-1 || bc == -MaxCoef-1 {
			return
		}
		a, b := New(ac, int(as%(MaxScale+1))), New(bc, int(bs%(MaxScale+1)))
		p := int(prec % (MaxScale + 1))
		ra, rb := rat(a), rat(b)

		got, err := MulRound(a, b, p)
		want := roundRef(new(big.Rat).Mul(ra, rb), p)
		if err == nil {
			if rat(got).Cmp(want) != 0 || got.Scale() != p {
				t.Fatalf("MulRound(%s, %s, %d) = %s, want %s", a, b, p, got, want.FloatString(p))
			}
		} else if fits(want, p) {
			t.Fatalf("MulRound(%s, %s, %d): %v, but %s fits", a, b, p, err, want.FloatString(p))
		}

		sum, err := Add(a, b)
		wantSum := new(big.Rat).Add(ra, rb)
		if err == nil && rat(sum).Cmp(wantSum) != 0 {
			t.Fatalf("Add(%s, %s) = %s", a, b, sum)
		}
		if err != nil && fits(wantSum, max(a.Scale(), b.Scale())) {
			t.Fatalf("Add(%s, %s): %v, but the sum fits", a, b, err)
		}
		if c := Cmp(a, b); c != ra.Cmp(rb) {
			t.Fatalf("Cmp(%s, %s) = %d", a, b, c)
		}
	})
}

// fits reports whether r has a coefficient within ±(2^63-1) at scale s.
func fits(r *big.Rat, s int) bool {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(scale))
	if !x.IsInt() {
		return false
	}
	lim := new(big.Int).SetUint64(MaxCoef)
	return x.Num().CmpAbs(lim) <= 0
}
