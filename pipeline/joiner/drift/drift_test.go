package drift

import (
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
)

func TestCriticalOutranksEveryWarning(t *testing.T) {
	var maxWarning, minCritical float64 = 0, 1e18
	for c := Class(0); c < NumClasses; c++ {
		for _, rc := range []uint32{0, 1, 3, 10, 1000} {
			s := AttentionScore(c, contract.StatusOpen, rc)
			switch PolicyOf(c).Severity {
			case contract.SeverityWarning:
				maxWarning = max(maxWarning, s)
			case contract.SeverityCritical:
				minCritical = min(minCritical, s)
			}
		}
	}
	if minCritical <= maxWarning {
		t.Fatalf("lowest critical score %v does not outrank highest warning %v", minCritical, maxWarning)
	}
	if s := AttentionScore(IdentityMismatch, contract.StatusResolved, 5); s != 0 {
		t.Fatalf("resolved finding scores %v, want 0", s)
	}
}

func TestClassNamesRoundTrip(t *testing.T) {
	for c := Class(0); c < NumClasses; c++ {
		got, ok := ParseClass(c.String())
		if !ok || got != c {
			t.Fatalf("ParseClass(%q) = %v, %v", c.String(), got, ok)
		}
		if PolicyOf(c).Runbook == "" || PolicyOf(c).Severity == "" {
			t.Fatalf("class %v has no policy", c)
		}
	}
	if EvidenceID(Missing, "maas/n1") != "missing_provider_resource:maas/n1" {
		t.Fatal("evidence id format changed")
	}
}

// TestClassNames pins each Class to its contract classification: the
// names come from the contract's list by position.
func TestClassNames(t *testing.T) {
	for c, want := range map[Class]contract.Classification{
		Orphan: contract.ClassOrphan, Missing: contract.ClassMissing, Stale: contract.ClassStale,
		IdentityMismatch: contract.ClassIdentity, Quota: contract.ClassQuota, Route: contract.ClassRoute,
	} {
		if c.String() != string(want) {
			t.Errorf("class %d is %q, want %q", c, c.String(), want)
		}
	}
}
