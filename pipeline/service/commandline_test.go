package service

import (
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
)

// TestCommandLine: a binary's own flags sit beside the shared and the
// logging flags on one flag set.
func TestCommandLine(t *testing.T) {
	cl := NewCommandLine("x")
	own := cl.String("x.own", "", "")
	if err := cl.FlagSet.Parse([]string{"-env=" + contract.EnvDev, "-log.level=warn", "-x.own=y"}); err != nil {
		t.Fatal(err)
	}
	if cl.Common.Environment != contract.EnvDev || cl.log.Level != "warn" || *own != "y" || cl.Name() != "x" {
		t.Fatalf("parsed %+v, log %+v, own %q, name %q", cl.Common, cl.log, *own, cl.Name())
	}
}
