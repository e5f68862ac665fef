package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/driftline/driftline/internal/demo"
	"github.com/driftline/driftline/internal/stack"
)

// detachTimeout bounds `up -detach` waiting for the background stack; it
// covers a first start that installs ClickHouse.
const detachTimeout = 20 * time.Minute

func cmdUp(args []string) error {
	fs, o, parse := flags("up")
	detach := fs.Bool("detach", false, "start the stack in the background, logging to <stack.dir>/log/stack.log, and return once it is healthy; stop it with: stack down")
	if err := parse(args); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	if *detach {
		// The background supervisor is this command without -detach.
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable: %w", err)
		}
		child := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
			return slices.Contains([]string{"-detach", "--detach", "-detach=true", "--detach=true"}, a)
		})
		st, err := stack.Detach(ctx, o.Dir, append([]string{exe, "up", "-stack.dir=" + o.Dir}, child...), detachTimeout, os.Stdout)
		if errors.Is(err, stack.ErrRunning) {
			fmt.Printf("a stack is already running (pid %d, %s):\n", st.Pid, st.Status)
		} else if err != nil {
			return err
		} else {
			fmt.Println("driftline stack is up (stop it with `bin/stack down` or `make down`):")
		}
		st.WriteAddresses(os.Stdout)
		return nil
	}
	s, err := stack.Start(ctx, *o)
	if err != nil {
		return err
	}
	fmt.Println("driftline stack is up (Ctrl-C stops it):")
	s.State().WriteAddresses(os.Stdout)
	return s.WaitAndStop(ctx, os.Stderr)
}

func cmdDown(args []string) error {
	fs, o, parse := flags("down")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the stack to stop in order before killing what is left")
	if err := parse(args); err != nil {
		return err
	}
	err := stack.Down(context.Background(), o.Dir, *timeout)
	if errors.Is(err, stack.ErrNotRunning) {
		fmt.Printf("%v: %s\n", err, o.Dir)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Println("stack stopped")
	return nil
}

func cmdStatus(args []string) error {
	_, o, parse := flags("status")
	if err := parse(args); err != nil {
		return err
	}
	st, running, err := stack.ReadState(o.Dir)
	if errors.Is(err, stack.ErrNotRunning) || (err == nil && !running) {
		fmt.Printf("no stack is running in %s\n", o.Dir)
		os.Exit(3)
	}
	if err != nil {
		return err
	}
	st.WriteStatus(os.Stdout)
	return nil
}

func cmdRun(args []string) error {
	fs, o, parse := flags("run")
	d := demo.DefaultOptions()
	fs.DurationVar(&d.CatchUp, "run.catchUp", d.CatchUp,
		"how long to wait for the joiner to process the fed fleet before printing the summary anyway; a slow machine may need more")
	stay := fs.Bool("run.stay", true, "after the summary, keep a stack this command started running until Ctrl-C; false stops it at once")
	fs.StringVar(&d.APIKey, "run.apiKey", d.APIKey, "API key the fleet is fed with (env DRIFTLINE_API_KEY)")
	d.Fleet.RegisterFlags(fs)
	if err := parse(args); err != nil {
		return err
	}
	// -fleet.start pins the fleet's event time; otherwise it ends about now.
	fs.Visit(func(f *flag.Flag) { d.EndNow = d.EndNow && f.Name != "fleet.start" })
	ctx, stop := signalContext()
	defer stop()

	// Use a stack already running in this directory (make up); otherwise
	// start one and own it.
	var s *stack.Stack
	st, running, err := stack.ReadState(o.Dir)
	if err == nil && running && st.Status == stack.StatusReady {
		fmt.Printf("using the stack already running in %s (pid %d)\n", st.Dir, st.Pid)
	} else {
		fmt.Printf("starting the stack in %s (log lines below; children log to %s/log)\n", o.Dir, o.Dir)
		if s, err = stack.Start(ctx, *o); err != nil {
			return err
		}
		st = s.State()
	}
	stopStack := func() error {
		if s == nil {
			return nil
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return s.Stop(sctx)
	}

	if err := demo.Run(ctx, st, d); err != nil {
		if ctx.Err() != nil {
			fmt.Println("interrupted")
			return stopStack()
		}
		_ = stopStack()
		return err
	}
	if s == nil || !*stay {
		return stopStack()
	}
	fmt.Println("\nthe stack keeps running; Ctrl-C stops it (running `make run` again reuses its data)")
	return s.WaitAndStop(ctx, os.Stderr)
}
