// Command stack runs the local Driftline stack: ClickHouse, the broker and
// the pipeline services as child processes, with all state under .driftline/
// at the repository root (see internal/stack for the environment variables).
//
//	stack up [-detach]   start the stack; -detach returns once it is healthy
//	stack down           stop a detached stack
//	stack status         show what runs and where
//	stack run            start the stack, feed a synthetic fleet, summarise
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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

Run "stack <command> -h" for the flags of a command. Ports, directories and
ClickHouse settings come from DRIFTLINE_* environment variables; see
"go doc ./pipeline/stack".
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "up":
		err = cmdUp(args)
	case "down":
		err = cmdDown(args)
	case "status":
		err = cmdStatus(args)
	case "run":
		err = cmdRun(args)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "stack: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stack %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// common are the flags every subcommand shares.
type common struct {
	dir    string
	binDir string
}

func registerCommon(fs *flag.FlagSet) *common {
	c := &common{}
	fs.StringVar(&c.dir, "stack.dir", service.Env(stack.EnvDir, defaultDir()),
		"state directory: data, logs and the pid file of the stack (env "+stack.EnvDir+"); one stack runs per directory")
	fs.StringVar(&c.binDir, "stack.binDir", service.Env(stack.EnvBinDir, ""),
		"directory of the broker and service binaries (env "+stack.EnvBinDir+"; default: the directory of this executable)")
	return c
}

func (c *common) options(log io.Writer) stack.Options {
	o := stack.DefaultOptions()
	o.Dir = c.dir
	o.BinDir = c.binDir
	o.Log = log
	return o
}

// defaultDir is .driftline at the root of the repository holding the working
// directory (found by its go.mod), so `make up` and `bin/stack status` from
// a subdirectory agree; outside a checkout it is ./.driftline.
func defaultDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ".driftline"
	}
	for d := wd; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/driftline/driftline\n") {
			return filepath.Join(d, ".driftline")
		}
		parent := filepath.Dir(d)
		if parent == d {
			return filepath.Join(wd, ".driftline")
		}
		d = parent
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

// waitAndStop runs until ctx ends, reporting children that exit, then stops
// the stack in order.
func waitAndStop(ctx context.Context, s *stack.Stack, out io.Writer) error {
	for {
		select {
		case e := <-s.Exited():
			fmt.Fprintf(out, "stack: %v (no restart; the rest keeps running, Ctrl-C stops all)\n", e)
		case <-ctx.Done():
			fmt.Fprintln(out, "stack: stopping")
			stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			return s.Stop(stopCtx)
		}
	}
}

func printAddresses(w io.Writer, st stack.State) {
	fmt.Fprintf(w, "  state dir    %s\n", st.Dir)
	fmt.Fprintf(w, "  broker       %s\n", st.Broker)
	fmt.Fprintf(w, "  clickhouse   %s (native), http://%s (http), database %s\n", st.ClickHouse, st.HTTP, st.Database)
	for _, u := range []struct{ name, url string }{
		{"ingest", st.Ingest}, {"joiner", st.Joiner}, {"rater", st.Rater}, {"query", st.Query},
	} {
		if u.url != "" {
			fmt.Fprintf(w, "  %-12s %s\n", u.name, u.url)
		}
	}
	fmt.Fprintf(w, "  logs         %s\n", filepath.Join(st.Dir, "log"))
}
