package chserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/chserver"
	"github.com/driftline/driftline/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func options(t *testing.T, dir string) chserver.Options {
	t.Helper()
	bin := testenv.ClickHouseServer(t)
	return chserver.Options{
		Dir:           dir,
		TCPPort:       testenv.FreePort(t),
		HTTPPort:      testenv.FreePort(t),
		Binary:        bin,
		DieWithParent: true,
	}
}

func start(t *testing.T, o chserver.Options) *chserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := chserver.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// query runs q over the HTTP interface and returns its trimmed output.
func query(t *testing.T, s *chserver.Server, q string) string {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post(
		"http://"+s.HTTPAddr()+"/?query="+url.QueryEscape(q), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s: %s", q, resp.Status, b)
	}
	return strings.TrimSpace(string(b))
}

func TestStartRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	o := options(t, dir)
	s := start(t, o)
	if s.Attached() {
		t.Fatal("fresh start reported as attached")
	}
	if got := query(t, s, "SELECT 1"); got != "1" {
		t.Fatalf("SELECT 1 = %q", got)
	}
	if got := query(t, s, "SELECT toString(toDateTime(86400))"); got != "1970-01-02 00:00:00" {
		t.Fatalf("server timezone %q, want UTC from the config", got)
	}
	query(t, s, "CREATE DATABASE keep")
	query(t, s, "CREATE TABLE keep.t (x UInt32) ENGINE = MergeTree ORDER BY x")
	query(t, s, "INSERT INTO keep.t (x) VALUES (7)")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "clickhouse.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file left after Stop: %v", err)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Fatal("port still answers after Stop")
	}

	s2 := start(t, o)
	if got := query(t, s2, "SELECT sum(x) FROM keep.t"); got != "7" {
		t.Fatalf("after restart sum = %q, want 7", got)
	}
}

// TestKillKeepsData kills the server as a crash would and starts it again
// on the same directory: what it had acknowledged is still there.
func TestKillKeepsData(t *testing.T) {
	o := options(t, t.TempDir())
	s := start(t, o)
	query(t, s, "CREATE DATABASE keep")
	query(t, s, "CREATE TABLE keep.t (x UInt32) ENGINE = MergeTree ORDER BY x")
	query(t, s, "INSERT INTO keep.t (x) VALUES (7)")
	s.Kill()
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Kill")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop after Kill: %v", err)
	}
	s2 := start(t, o)
	if s2.Attached() {
		t.Fatal("a killed server was attached to instead of started")
	}
	if got := query(t, s2, "SELECT sum(x) FROM keep.t"); got != "7" {
		t.Fatalf("after kill and restart sum = %q, want 7", got)
	}
}

func TestAttach(t *testing.T) {
	o := options(t, t.TempDir())
	s := start(t, o)
	again := start(t, o)
	if !again.Attached() || again.PID() != s.PID() {
		t.Fatalf("second Start: attached %v pid %d, want attached to pid %d", again.Attached(), again.PID(), s.PID())
	}
	// Stopping the attached handle stops the server the first one owns.
	if err := again.Stop(); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 10*time.Second, func() error {
		select {
		case <-s.Done():
			return nil
		default:
			return errors.New("server still running")
		}
	})

	// A previous run's server on other ports is named, not half-attached.
	s3 := start(t, o)
	moved := o
	moved.TCPPort = testenv.FreePort(t)
	if _, err := chserver.Start(context.Background(), moved); err == nil || !strings.Contains(err.Error(), strconv.Itoa(s3.PID())) {
		t.Fatalf("Start on moved ports = %v, want an error naming pid %d", err, s3.PID())
	}
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o := options(t, t.TempDir())
	o.TCPPort = l.Addr().(*net.TCPAddr).Port
	_, err = chserver.Start(context.Background(), o)
	var inUse *chserver.PortInUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), "DRIFTLINE_CLICKHOUSE_ADDR") {
		t.Fatalf("Start on a taken port = %v, want PortInUseError naming DRIFTLINE_CLICKHOUSE_ADDR", err)
	}
}

// writeScript writes an executable shell script of body as dir/name and
// returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStartErrorShowsLog(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "fake-server", "echo 'config is broken: fix line 3' >&2\nexit 70\n")
	o := options(t, filepath.Join(dir, "srv"))
	o.Binary = chserver.Binary{Path: script}
	_, err := chserver.Start(context.Background(), o)
	var se *chserver.StartError
	if !errors.As(err, &se) || !strings.Contains(se.LogTail, "fix line 3") {
		t.Fatalf("Start with a failing binary = %v, want StartError with the log tail", err)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	multi := writeScript(t, dir, "clickhouse", "")
	t.Setenv(chserver.EnvBinary, multi)
	b, err := chserver.Find()
	if err != nil {
		t.Fatal(err)
	}
	if b.Path != multi || !b.MultiCall {
		t.Fatalf("Find = %+v, want multi-call %s", b, multi)
	}
	if got := strings.Join(b.Args("/c.xml"), " "); got != "server --config-file=/c.xml" {
		t.Fatalf("Args = %q", got)
	}
	t.Setenv(chserver.EnvBinary, filepath.Join(dir, "missing"))
	if _, err := chserver.Find(); err == nil || !strings.Contains(err.Error(), chserver.EnvBinary) {
		t.Fatalf("Find with a bad %s = %v", chserver.EnvBinary, err)
	}
}

// TestDieWithParent runs a child test process that starts a server with
// DieWithParent and exits without stopping it: the kernel must kill the
// server.
func TestDieWithParent(t *testing.T) {
	if dir := os.Getenv("CHSERVER_ORPHAN_DIR"); dir != "" {
		o := options(t, dir)
		s, err := chserver.Start(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("pid", s.PID())
		os.Exit(0)
	}
	testenv.ClickHouseServer(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDieWithParent$")
	cmd.Env = append(os.Environ(), "CHSERVER_ORPHAN_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var pid int
	for _, line := range strings.Split(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "pid "); ok {
			pid, _ = strconv.Atoi(p)
		}
	}
	if pid == 0 {
		t.Fatalf("child printed no pid:\n%s", out)
	}
	testenv.CheckFor(t, 10*time.Second, func() error {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return nil // gone, or a zombie awaiting init
		}
		return fmt.Errorf("server pid %d outlived its parent", pid)
	})
}

// TestConcurrentStart starts one directory's server from two goroutines:
// one starts it, the other waits and attaches.
func TestConcurrentStart(t *testing.T) {
	o := options(t, t.TempDir())
	servers := make(chan *chserver.Server, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			s, err := chserver.Start(context.Background(), o)
			if err != nil {
				errs <- err
				return
			}
			servers <- s
		}()
	}
	var got []*chserver.Server
	for range 2 {
		select {
		case s := <-servers:
			got = append(got, s)
		case err := <-errs:
			t.Fatal(err)
		}
	}
	for _, s := range got {
		t.Cleanup(func() { _ = s.Stop() })
	}
	if got[0].PID() != got[1].PID() || got[0].Attached() == got[1].Attached() {
		t.Fatalf("concurrent Starts: pids %d, %d attached %v, %v; want one server, started once and attached once",
			got[0].PID(), got[1].PID(), got[0].Attached(), got[1].Attached())
	}
}
