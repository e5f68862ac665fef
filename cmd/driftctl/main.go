// Command driftctl reads the query API from a shell: drift findings, the
// heat map, the attention queue, billing mismatches, the automation flag
// and nodes, the fleet core (lifecycle timelines, rollouts, relays, sync
// debt), as tables, JSON or CSV, and takes operator actions (package
// pipeline/api/cli).
//
//	driftctl drift severity=critical -o csv
//	driftctl heatmap | attention | billing | automation | node [node_id] [-tag t]
//	driftctl timeline <node_id> | rollouts | relays | syncdebt
//	driftctl act <action> <evidence_id>|batch reason=... [key=...]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/driftline/driftline/pipeline/api/cli"
)

func main() {
	if len(os.Args) < 2 {
		cli.PrintUsage(os.Stderr)
		os.Exit(2)
	}
	name := os.Args[1]
	switch {
	case name == "-h" || name == "-help" || name == "--help" || name == "help":
		cli.PrintUsage(os.Stdout)
		return
	case !cli.IsCommand(name):
		fmt.Fprintf(os.Stderr, "driftctl: unknown subcommand %q\n\n", name)
		cli.PrintUsage(os.Stderr)
		os.Exit(2)
	}
	if err := cli.Run(name, os.Args[2:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "driftctl "+name+": "+err.Error())
		os.Exit(1)
	}
}
