package sink

import (
	"testing"

	"github.com/driftline/driftline/internal/testenv"
)

// TestMain stops the ClickHouse server the tests started and removes its
// directory.
func TestMain(m *testing.M) { testenv.Main(m) }
