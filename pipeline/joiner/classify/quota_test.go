package classify

import "testing"

func TestExceedsQuota(t *testing.T) {
	for _, c := range []struct {
		usage, quota string
		want         bool
	}{
		{"1", "1.000", false}, {"0", "-0.0", false}, {"10", "9.999", true}, {"0.50001", "0.5", true},
		{"0", "-1", true}, {"-1.5", "-2", true}, {"100.25", "100.2", true}, {"007", "7", false},
		{"12.500000", "12.5", false}, {"0.000001", "0", true}, {"9223372036854775807", "922337203685477580.6", true},
	} {
		if got, ok := ExceedsQuota(c.usage, c.quota); !ok || got != c.want {
			t.Errorf("ExceedsQuota(%q, %q) = %v, %v; want %v", c.usage, c.quota, got, ok, c.want)
		}
		if got, _ := ExceedsQuota(c.quota, c.usage); got && c.want {
			t.Errorf("ExceedsQuota(%q, %q) and its converse both hold", c.usage, c.quota)
		}
	}
	for _, bad := range [][2]string{{"1e3", "1"}, {"1", "+1"}, {"1.0000000000000000001", "0"}, {"", "1"}} {
		if got, ok := ExceedsQuota(bad[0], bad[1]); ok || got {
			t.Errorf("ExceedsQuota(%q, %q) = %v, %v; want no comparison", bad[0], bad[1], got, ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ExceedsQuota("12.500000", "12.5") }); n != 0 {
		t.Errorf("ExceedsQuota allocates %v times", n)
	}
}
