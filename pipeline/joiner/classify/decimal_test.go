package classify

import "testing"

func TestCompareDecimal(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1", "1.000", 0}, {"0", "-0.0", 0}, {"10", "9.999", 1}, {"0.5", "0.50001", -1},
		{"-1", "0", -1}, {"-2", "-1.5", -1}, {"100.25", "100.2", 1}, {"007", "7", 0},
		{"12.500000", "12.5", 0}, {"0.000001", "0", 1},
	} {
		if got := compareDecimal(c.a, c.b); got != c.want {
			t.Errorf("compareDecimal(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := compareDecimal(c.b, c.a); got != -c.want {
			t.Errorf("compareDecimal(%q, %q) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}
