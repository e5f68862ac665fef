package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// modulePath is the import path prefix of the project's commands.
const modulePath = "github.com/driftline/driftline/cmd/"

// Build compiles the stack's executables into binDir with the go command
// on PATH, for tests that start a stack from a temporary directory. With no
// names it builds every command (./cmd/...); otherwise only the named ones
// (broker, ingest, ...). It must run inside the module, as tests do.
func Build(ctx context.Context, binDir string, names ...string) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("create bin dir: %w", err)
	}
	pkgs := []string{modulePath + "..."}
	if len(names) > 0 {
		pkgs = pkgs[:0]
		for _, n := range names {
			pkgs = append(pkgs, modulePath+n)
		}
	}
	args := append([]string{"build", "-o", binDir + string(os.PathSeparator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, out)
	}
	return nil
}
