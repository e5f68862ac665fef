package reader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// TestMoneySQLReadsTheDecimalRule runs the SQL the money totals are built
// from on a real ClickHouse and holds it to decimal.Parse: a string is
// summed at its value exactly when it is a contract decimal, and counted
// as invalid otherwise.
func TestMoneySQLReadsTheDecimalRule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, _ := testenv.ClickHouseConn(t)
	q := "SELECT " + validSQL("v") + ", " + invalidSQL("v") + ", toString(" + decSQL("v") + ") FROM (SELECT ? AS v)"
	for _, s := range []string{
		"0", "-0", "-0.00", "12.500000", "0012.5", "-3.1", "7",
		"000000000000000000000000000001", "-0000000000000000000000000000012.50",
		"0.000000000000000001", "-0.000000000000000001", "1.000000000000000000",
		"9223372036854775807", "-9223372036854775807", "9.223372036854775807", "922337203685477580.7",
		"999999999999999999", "0.999999999999999999", "1234567890123.123456",
		"1.0000000000000000001", "0.0000000000000000001", "9223372036854775808", "-9223372036854775808",
		"9.223372036854775808", "10.000000000000000000", "99999999999999999999", "18446744073709551616",
		"123456789012345678901234", "99999999999999999999.999999999999999999",
		"+1", "1e3", "1E-3", "", "-", ".5", "5.", "-.5", "--1", "1.2.3", " 1", "1 ", "1,5", "NaN", "Inf",
		"0x10", "١", "1.-5", "1-", "'", "?",
	} {
		var valid, invalid uint8
		var sum string
		if err := conn.QueryRow(ctx, q, s).Scan(&valid, &invalid, &sum); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		d, perr := decimal.Parse(s)
		if (valid == 1) != (perr == nil) {
			t.Errorf("%q: the SQL says decimal %v, decimal.Parse %v", s, valid == 1, perr)
		}
		if (invalid == 1) != (s != "" && perr != nil) {
			t.Errorf("%q: the SQL says invalid %v, decimal.Parse %v", s, invalid == 1, perr)
		}
		got, err := parseFixed(sum)
		if err != nil {
			t.Fatalf("%q: sum %q: %v", s, sum, err)
		}
		want := fixed{}
		if perr == nil {
			if want, err = parseFixed(d.String()); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(perr, decimal.ErrSyntax) && !errors.Is(perr, decimal.ErrScale) && !errors.Is(perr, decimal.ErrRange) {
			t.Fatalf("%q: unexpected error %v", s, perr)
		}
		if got.v.Cmp(&want.v) != 0 {
			t.Errorf("%q: summed as %s, want %s", s, sum, want.format(sumScale))
		}
	}
}
