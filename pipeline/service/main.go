package service

import (
	"log/slog"
	"os"
)

// Main runs run and exits 1 with its error logged, prefixed by name, when
// it fails.
func Main(name string, run func() error) {
	if err := run(); err != nil {
		slog.Error(name + ": " + err.Error())
		os.Exit(1)
	}
}
