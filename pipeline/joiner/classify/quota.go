package classify

import "github.com/driftline/driftline/pipeline/contract/decimal"

// ExceedsQuota reports whether observed usage is above a record's quota,
// both contract decimals compared exactly (quota_or_capacity_mismatch).
// ok is false when either is not a decimal by decimal.Parse: the
// validator lets none through, and a value that cannot be read raises no
// finding. It does not allocate.
func ExceedsQuota(usage, quota string) (exceeds, ok bool) {
	u, err := decimal.Parse(usage)
	if err != nil {
		return false, false
	}
	q, err := decimal.Parse(quota)
	if err != nil {
		return false, false
	}
	return decimal.Cmp(u, q) > 0, true
}
