package service

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
)

// CommandLine is the command line of a binary that is no stream stage
// (those use package stage): the shared flags and the logging flags on a
// flag set of its own, to which the binary adds its own flags.
type CommandLine struct {
	*flag.FlagSet
	// Common holds the shared settings, once Parse has parsed the flags.
	Common *Common

	log *LogOptions
}

// NewCommandLine registers the shared flags (RegisterFlags) and the
// logging flags (LogFlags) on a new flag set named name that exits on a
// malformed flag.
func NewCommandLine(name string) *CommandLine {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	return &CommandLine{FlagSet: fs, Common: RegisterFlags(fs), log: LogFlags(fs)}
}

// Parse parses the process's arguments and sets up logging, writing to
// os.Stderr. A logging flag it cannot use ends the process as a malformed
// flag does: the error on stderr, prefixed by the name, and exit status 2.
func (c *CommandLine) Parse() *slog.Logger {
	_ = c.FlagSet.Parse(os.Args[1:])
	log, err := SetupLogging(c.log, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, c.Name()+":", err)
		os.Exit(2)
	}
	return log
}
