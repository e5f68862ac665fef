// Command stack runs the local Driftline stack: ClickHouse, the broker and
// the pipeline services as child processes, with all state under .driftline/
// at the repository root (see internal/stack for the environment variables).
//
//	stack up [-detach]   start the stack; -detach returns once it is healthy
//	stack down           stop a detached stack
//	stack status         show what runs and where
//	stack run            start the stack, feed a synthetic fleet, summarise (internal/demo)
//	stack cluster-up     start a local ClickHouse cluster (ZooKeeper, 2 shards x 2 replicas) and migrate it
//	stack cluster-down   stop it
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/pipeline/service"
)

const usage = `usage: stack <command> [flags]

commands:
  up      start the stack in the foreground; -detach starts it in the background
  down    stop a stack started with up -detach
  status  show the running stack's addresses and children
  run     start the stack (or use the running one), feed a synthetic fleet
          through the ingest gateway, wait for the pipeline to catch up,
          print a summary, then run until Ctrl-C
  cluster-up    start a local ClickHouse cluster in the background (ZooKeeper
                and 2 shards x 2 replicas on loopback ports), migrate the
                read model on it and print the flags that use it
  cluster-down  stop the cluster started with cluster-up (data stays)

Run "stack <command> -h" for the flags of a command. Ports, directories and
ClickHouse settings come from DRIFTLINE_* environment variables; see
"go doc ./internal/stack".
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return
	}
	run, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(os.Stderr, "stack: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err := run(args); err != nil {
		fmt.Fprintf(os.Stderr, "stack %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// commands are the stack's commands by name, as usage lists them.
var commands = map[string]func(args []string) error{
	"up":           cmdUp,
	"down":         cmdDown,
	"status":       cmdStatus,
	"run":          cmdRun,
	"cluster-up":   cmdClusterUp,
	"cluster-down": cmdClusterDown,
}

// flags registers the flags every command shares on a new flag set: the
// stack's directories and the logging flags, which the children inherit.
// parse parses a command's arguments, sets up logging and passes the
// logging settings to the children through their environment.
func flags(name string) (fs *flag.FlagSet, o *stack.Options, parse func(args []string) error) {
	fs = flag.NewFlagSet(name, flag.ExitOnError)
	opts := stack.DefaultOptions()
	o = &opts
	fs.StringVar(&o.Dir, "stack.dir", o.Dir,
		"state directory: data, logs and the pid file of the stack (env "+stack.EnvDir+"); one stack runs per directory")
	fs.StringVar(&o.BinDir, "stack.binDir", o.BinDir,
		"directory of the broker and service binaries (env "+stack.EnvBinDir+"; default: the directory of this executable)")
	logOpts := service.LogFlags(fs)
	return fs, o, func(args []string) error {
		_ = fs.Parse(args)
		if _, err := service.SetupLogging(logOpts, os.Stderr); err != nil {
			return err
		}
		o.Log = os.Stderr
		o.Env = append(o.Env, logOpts.Env()...)
		return nil
	}
}

// signalContext is cancelled by the first SIGINT or SIGTERM; a second one
// kills the process at once, for a stop that hangs.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ch
		cancel()
		<-ch
		fmt.Fprintln(os.Stderr, "stack: second signal, exiting without a clean stop")
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}
