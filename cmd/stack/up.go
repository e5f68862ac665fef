package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/driftline/driftline/internal/stack"
)

// detachTimeout bounds `up -detach` waiting for the background stack; it
// covers a first start that installs ClickHouse.
const detachTimeout = 20 * time.Minute

func cmdUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	c := registerCommon(fs)
	detach := fs.Bool("detach", false, "start the stack in the background, logging to <stack.dir>/log/stack.log, and return once it is healthy; stop it with `stack down`")
	_ = fs.Parse(args)

	if *detach {
		return upDetached(c, args)
	}
	ctx, stop := signalContext()
	defer stop()
	s, err := stack.Start(ctx, c.options(os.Stderr))
	if err != nil {
		return err
	}
	fmt.Println("driftline stack is up (Ctrl-C stops it):")
	printAddresses(os.Stdout, s.State())
	return waitAndStop(ctx, s, os.Stderr)
}

// upDetached re-runs this executable as `up` (without -detach) in a new
// session with its output in stack.log, and waits until the state file of
// that process says ready.
func upDetached(c *common, args []string) error {
	if err := os.MkdirAll(filepath.Join(c.dir, "log"), 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	if st, running, err := stack.ReadState(c.dir); err == nil && running {
		fmt.Printf("a stack is already running (pid %d, %s):\n", st.Pid, st.Status)
		printAddresses(os.Stdout, st)
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	logPath := filepath.Join(c.dir, "log", "stack.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", logPath, err)
	}
	defer lf.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devNull.Close()

	var childArgs []string
	for _, a := range args {
		if a != "-detach" && a != "--detach" && a != "-detach=true" && a != "--detach=true" {
			childArgs = append(childArgs, a)
		}
	}
	childArgs = append([]string{"up", "-stack.dir=" + c.dir}, childArgs...)
	cmd := exec.Command(exe, childArgs...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start background stack: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("starting the stack in the background (pid %d, log %s)\n", cmd.Process.Pid, logPath)

	deadline := time.After(detachTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("background stack exited (%v) before it was ready; see %s", err, logPath)
		case <-deadline:
			return fmt.Errorf("background stack (pid %d) not ready within %s; see %s, stop it with `stack down`", cmd.Process.Pid, detachTimeout, logPath)
		case <-tick.C:
		}
		st, _, err := stack.ReadState(c.dir)
		if err != nil || st.Pid != cmd.Process.Pid || st.Status != stack.StatusReady {
			continue
		}
		fmt.Println("driftline stack is up (stop it with `bin/stack down` or `make down`):")
		printAddresses(os.Stdout, st)
		return cmd.Process.Release()
	}
}

func cmdDown(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	c := registerCommon(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the stack to stop in order before killing what is left")
	_ = fs.Parse(args)
	err := stack.Down(context.Background(), c.dir, *timeout)
	if errors.Is(err, stack.ErrNotRunning) {
		fmt.Printf("%v: %s\n", err, c.dir)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Println("stack stopped")
	return nil
}

func cmdStatus(args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	c := registerCommon(fs)
	_ = fs.Parse(args)
	st, running, err := stack.ReadState(c.dir)
	if errors.Is(err, stack.ErrNotRunning) || (err == nil && !running) {
		fmt.Printf("no stack is running in %s\n", c.dir)
		os.Exit(3)
	}
	if err != nil {
		return err
	}
	fmt.Printf("stack %s (supervisor pid %d, up %s)\n", st.Status, st.Pid, time.Since(st.StartedAt).Round(time.Second))
	printAddresses(os.Stdout, st)
	fmt.Println("children:")
	client := &http.Client{Timeout: time.Second}
	urls := map[string]string{"ingest": st.Ingest, "joiner": st.Joiner, "rater": st.Rater, "query": st.Query}
	for _, ch := range st.Children {
		state := "running"
		if syscall.Kill(ch.Pid, 0) != nil {
			state = "EXITED"
		} else if u := urls[ch.Name]; u != "" {
			state = "running, /healthz " + health(client, u+"/healthz")
		}
		fmt.Printf("  %-11s pid %-7d %s  (log %s)\n", ch.Name, ch.Pid, state, ch.Log)
	}
	return nil
}

func health(client *http.Client, url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return "unreachable"
	}
	resp.Body.Close()
	return resp.Status
}
