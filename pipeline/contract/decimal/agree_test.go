package decimal_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
	"github.com/driftline/driftline/pipeline/joiner/classify"
)

// EdgeCases are strings at the edges of the decimal rule, and whether
// each is a decimal.
var edgeCases = []struct {
	s  string
	ok bool
}{
	{"0", true},
	{"-0", true},
	{"-0.00", true},
	{"12.500000", true},
	{"0012.5", true},
	{"000000000000000000000000000001", true}, // leading zeros do not count
	{"0.000000000000000001", true},           // MaxScale fractional digits
	{"1.000000000000000000", true},           // 19 digits, coefficient 10^18
	{"9223372036854775807", true},            // MaxCoef
	{"-9223372036854775807", true},
	{"9.223372036854775807", true},
	{"922337203685477580.7", true},
	{"999999999999999999", true}, // every 18-digit value
	{"0.999999999999999999", true},
	{"1.0000000000000000001", false}, // too many fractional digits
	{"0.0000000000000000001", false}, // too many fractional digits, however small
	{"9223372036854775808", false},   // coefficient above MaxCoef
	{"-9223372036854775808", false},  // MinInt64 is not a coefficient
	{"9.223372036854775808", false},  // the same digits with a point
	{"10.000000000000000000", false}, // coefficient 10^19
	{"99999999999999999999", false},  // too many integer digits
	{"18446744073709551616", false},  // wraps uint64 exactly
	{"123456789012345678901234", false},
	{"+1", false},
	{"1e3", false},
	{"1E-3", false},
	{"", false},
	{"-", false},
	{".5", false},
	{"5.", false},
	{"-.5", false},
	{"--1", false},
	{"1.2.3", false},
	{" 1", false},
	{"1 ", false},
	{"1,5", false},
	{"NaN", false},
	{"Inf", false},
	{"0x10", false},
	{"١", false}, // a digit, but not an ASCII one
}

// TestOneRule holds every reader of a decimal string to one rule: Parse
// (the rater), the validator, the classifier's quota rule, and Pattern
// with MaxCoef (what the query API's SQL is built from).
func TestOneRule(t *testing.T) {
	syntax := regexp.MustCompile(decimal.Pattern)
	maxCoef := strconv.FormatInt(decimal.MaxCoef, 10)
	// bySQLRule is the rule as the query API's SQL states it: the
	// pattern, then the coefficient's digits compared with MaxCoef's.
	bySQLRule := func(s string) bool {
		if !syntax.MatchString(s) {
			return false
		}
		coef := strings.TrimLeft(strings.NewReplacer("-", "", ".", "").Replace(s), "0")
		return len(coef) < len(maxCoef) || len(coef) == len(maxCoef) && coef <= maxCoef
	}
	v := contract.Validator{Environment: contract.EnvLocalParity}
	for _, c := range edgeCases {
		d, err := decimal.Parse(c.s)
		if (err == nil) != c.ok {
			t.Errorf("Parse(%q) = %v, %v; want ok %v", c.s, d, err, c.ok)
		}
		if contract.IsDecimal(c.s) != c.ok {
			t.Errorf("contract.IsDecimal(%q) = %v, want %v", c.s, !c.ok, c.ok)
		}
		q, _ := json.Marshal(c.s)
		line := `{"event_id":"e1","event_type":"usage.recorded","schema_version":1,"producer":"gw","occurred_at":"2026-11-21T10:15:30Z",` +
			`"environment":"local_parity","payload":{"usage_id":"u1","metering_source":"gw","metering_id":"m1","unit_id":"gpu_hour",` +
			`"quantity":` + string(q) + `,"tenant_id":"t1","window_start":"2026-11-21T10:00:00Z","window_end":"2026-11-21T11:00:00Z"}}`
		if _, _, verr := v.DecodeEvent([]byte(line)); (verr == nil) != c.ok {
			t.Errorf("the validator on quantity %q: %v; want ok %v", c.s, verr, c.ok)
		} else if verr != nil && verr.Field != "payload.quantity" {
			t.Errorf("the validator on quantity %q blames %s", c.s, verr.Field)
		}
		if _, ok := classify.ExceedsQuota(c.s, "0"); ok != c.ok {
			t.Errorf("classify.ExceedsQuota(%q, 0) compares: %v, want %v", c.s, ok, c.ok)
		}
		if bySQLRule(c.s) != c.ok {
			t.Errorf("Pattern and MaxCoef on %q: %v, want %v", c.s, !c.ok, c.ok)
		}
	}
}
