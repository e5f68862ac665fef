package rater_test

import (
	"testing"

	"github.com/driftline/driftline/internal/testenv"
)

// TestMain stops the ClickHouse server the benchmarks started and removes
// its directory.
func TestMain(m *testing.M) { testenv.Main(m) }
