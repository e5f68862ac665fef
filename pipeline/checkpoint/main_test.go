package checkpoint

import (
	"testing"

	"github.com/driftline/driftline/pipeline/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
