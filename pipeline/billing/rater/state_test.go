package rater

import (
	"testing"
	"unsafe"

	"github.com/driftline/driftline/pipeline/contract"
)

// The rater decodes with a reused ZeroCopy contract.Decoder: the usage_id it
// stages must not alias the record it came from.
func TestCheckKeepsItsOwnUsageID(t *testing.T) {
	s := newKeyState()
	s.parts[3] = map[string]claim{}
	line := []byte("usage-1")
	u := &contract.Usage{UsageID: unsafe.String(&line[0], len(line))}
	if v, _ := s.check(3, u, "src/m-1", 7); v != verdictNew {
		t.Fatalf("verdict %v", v)
	}
	copy(line, "XXXXXXX") // the record's memory is reused
	s.commit()
	if got := s.parts[3]["src/m-1"]; got.usageID != "usage-1" || got.digest != 7 {
		t.Fatalf("kept %+v", got)
	}
}

// TestCheckTellsConflicts: the same usage_id with the same payload digest
// is a redelivery, with another one a conflict naming the first claim, and
// another usage_id on the key a duplicate; staged and committed alike.
func TestCheckTellsConflicts(t *testing.T) {
	s := newKeyState()
	s.parts[0] = map[string]claim{}
	u := &contract.Usage{UsageID: "u-1"}
	other := &contract.Usage{UsageID: "u-2"}
	for _, committed := range []bool{false, true} {
		if !committed {
			if v, _ := s.check(0, u, "k", 11); v != verdictNew {
				t.Fatalf("first: %v", v)
			}
		} else {
			s.commit()
		}
		if v, _ := s.check(0, u, "k", 11); v != verdictRedelivery {
			t.Fatalf("committed %v: redelivery: %v", committed, v)
		}
		if v, first := s.check(0, u, "k", 12); v != verdictConflict || first != (claim{"u-1", 11}) {
			t.Fatalf("committed %v: conflict: %v %+v", committed, v, first)
		}
		if v, first := s.check(0, other, "k", 11); v != verdictDuplicate || first.usageID != "u-1" {
			t.Fatalf("committed %v: duplicate: %v %+v", committed, v, first)
		}
	}
	// A claim restored without a digest (0) takes any payload for a
	// redelivery.
	s.parts[0]["old"] = claim{usageID: "u-9"}
	if v, _ := s.check(0, &contract.Usage{UsageID: "u-9"}, "old", 5); v != verdictRedelivery {
		t.Fatalf("unknown digest: %v", v)
	}
}
