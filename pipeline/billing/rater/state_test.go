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
	s.parts[3] = map[string]string{}
	line := []byte("usage-1")
	u := &contract.Usage{UsageID: unsafe.String(&line[0], len(line))}
	if v, _ := s.check(3, u, "src/m-1"); v != verdictNew {
		t.Fatalf("verdict %v", v)
	}
	copy(line, "XXXXXXX") // the record's memory is reused
	s.commit()
	if got := s.parts[3]["src/m-1"]; got != "usage-1" {
		t.Fatalf("kept usage_id %q", got)
	}
}
