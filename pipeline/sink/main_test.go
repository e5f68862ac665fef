package sink

import (
	"testing"

	"github.com/driftline/driftline/pipeline/testenv"
)

// TestMain stops the ClickHouse server the tests started and removes its
// directory.
func TestMain(m *testing.M) { testenv.Main(m) }
