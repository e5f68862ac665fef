package reader

import (
	"testing"

	"github.com/driftline/driftline/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
