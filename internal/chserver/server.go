package chserver

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/driftline/driftline/pipeline/service"
)

// Defaults of Options.
const (
	DefaultLogLevel     = "information"
	DefaultCacheSize    = 256 << 20
	DefaultMaxMemory    = 2 << 30
	DefaultStartTimeout = 60 * time.Second
	DefaultStopTimeout  = 15 * time.Second
)

// Options configures Start. The zero value runs the local stack's server.
type Options struct {
	// Dir holds the server's config, data and logs. Data in it from a
	// previous run is kept. Default: DefaultDir().
	Dir string
	// TCPPort is the native-protocol port on 127.0.0.1. Default: the port
	// of config.DefaultClickHouseAddr (19000).
	TCPPort int
	// HTTPPort is the HTTP port on 127.0.0.1, used for readiness checks
	// and by operators' tools. Default: the port of
	// config.DefaultClickHouseHTTP (18123).
	HTTPPort int
	// Binary is the server executable. Default: the result of Find.
	Binary Binary
	// Log also receives the server's stdout and stderr, which always go
	// to Dir/log/console.log. The server's own logs are in Dir/log.
	// Default: nil (the file only).
	Log io.Writer
	// LogLevel is the server's log level: trace, debug, information,
	// warning or error. Default: information.
	LogLevel string
	// CacheSize is the size in bytes of each of the mark and uncompressed
	// caches. Default: 256 MiB, ample for the read model; the server's own
	// default (5 GiB) is sized for a dedicated machine.
	CacheSize int64
	// MaxMemory caps the server's memory in bytes on releases that know
	// max_server_memory_usage (18.16 ignores it). Default: 2 GiB.
	MaxMemory int64
	// DieWithParent has the kernel kill the server (SIGKILL) when the
	// process that started it dies, so a test binary never leaves a server
	// behind. Default: false, so a local stack's server can be reattached
	// by the next Start.
	DieWithParent bool
	// StartTimeout bounds the wait for the server to answer a query.
	// Default: 60s, for a first start on a slow disk; a warm start takes
	// well under a second.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before it sends
	// SIGKILL. Default: 15s.
	StopTimeout time.Duration
	// Cluster makes the server a member of a cluster: the config gets the
	// cluster's shards (remote_servers, internal_replication on, so a
	// Distributed table writes one replica per shard and replication does
	// the rest), the ZooKeeper ensemble, the server's macros and the
	// distributed DDL queue. Default: nil, a server of its own.
	Cluster *Cluster
	// InterserverPort is the port on 127.0.0.1 replicas fetch parts from;
	// required with Cluster.
	InterserverPort int
}

// Cluster is a server's place in a cluster (Options.Cluster).
type Cluster struct {
	// Name is the cluster's name in remote_servers and ON CLUSTER.
	Name string
	// Shards lists each shard's replicas by native-protocol host:port.
	Shards [][]string
	// ZooKeeper lists the ensemble's client addresses, host:port.
	ZooKeeper []string
	// Shard and Replica are this server's macros {shard} and {replica},
	// which the paths of its ReplicatedMergeTree tables name.
	Shard, Replica string
}

// DefaultDir returns the directory of the local stack's server:
// $XDG_DATA_HOME/driftline/clickhouse, else
// ~/.local/share/driftline/clickhouse.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "driftline", "clickhouse"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("server directory: %w; Possible solutions: set Options.Dir", err)
	}
	return filepath.Join(home, ".local", "share", "driftline", "clickhouse"), nil
}

func (o *Options) setDefaults() error {
	if o.Dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return err
		}
		o.Dir = d
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("server directory %s: %w", o.Dir, err)
	}
	o.Dir = abs
	if o.TCPPort == 0 {
		o.TCPPort = portOf(service.DefaultClickHouseAddr)
	}
	if o.HTTPPort == 0 {
		o.HTTPPort = portOf(service.DefaultClickHouseHTTP)
	}
	if o.TCPPort == o.HTTPPort {
		return fmt.Errorf("clickhouse TCP and HTTP ports are both %d; Possible solutions: give them different ports", o.TCPPort)
	}
	if o.Binary.Path == "" {
		b, err := Find()
		if err != nil {
			return err
		}
		o.Binary = b
	}
	if o.LogLevel == "" {
		o.LogLevel = DefaultLogLevel
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Cluster != nil && (o.InterserverPort == 0 || o.InterserverPort == o.TCPPort || o.InterserverPort == o.HTTPPort) {
		return fmt.Errorf("clickhouse cluster member needs an interserver port of its own, not %d; Possible solutions: set Options.InterserverPort", o.InterserverPort)
	}
	return nil
}

func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		panic("BUG: malformed default address " + addr)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		panic("BUG: malformed default address " + addr)
	}
	return n
}

// Server is a running ClickHouse server, started by Start or attached to
// from a previous run.
type Server struct {
	dir         string
	tcpAddr     string
	httpAddr    string
	pid         int
	attached    bool
	stopTimeout time.Duration

	done     chan struct{} // closed when the process has exited
	watch    sync.Once     // starts the exit poller of an attached server
	exitErr  error         // the process's exit status; set before done closes
	stopOnce sync.Once
	stopErr  error
}

// Start runs the server of o.Dir and returns once it answers a query. If
// that directory's server is already running (left by a previous Start
// without Stop), Start attaches to it instead. ctx bounds only the start:
// the server runs until Stop.
func Start(ctx context.Context, o Options) (*Server, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{
		dir:         o.Dir,
		tcpAddr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(o.TCPPort)),
		httpAddr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(o.HTTPPort)),
		stopTimeout: o.StopTimeout,
		done:        make(chan struct{}),
	}
	unlock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if pid, ok := runningServer(o.Dir); ok {
		return s.attach(ctx, o, pid)
	}
	for _, p := range []struct{ addr, hint string }{
		{s.tcpAddr, "set DRIFTLINE_CLICKHOUSE_ADDR (or -clickhouse.addr) to a free port"},
		{s.httpAddr, "choose another ClickHouse HTTP port"},
	} {
		if listening(p.addr) {
			return nil, &PortInUseError{Addr: p.addr, Hint: p.hint}
		}
	}
	if err := writeConfig(o.Dir, o); err != nil {
		return nil, err
	}
	logs, err := openLogs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := s.launch(o, logs); err != nil {
		return nil, &StartError{Dir: o.Dir, Err: err, LogTail: logs.tail()}
	}
	if err := s.waitReady(ctx, o.StartTimeout); err != nil {
		_ = s.Stop()
		return nil, &StartError{Dir: o.Dir, Err: err, LogTail: logs.tail()}
	}
	return s, nil
}

// lockDir serialises Starts on one directory, across processes: the
// second waits, then finds the first's server running and attaches.
func lockDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, dirFileMode); err != nil {
		return nil, fmt.Errorf("create server directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock server directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock server directory %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// attach adopts the server pid that a previous Start left running in
// o.Dir.
func (s *Server) attach(ctx context.Context, o Options, pid int) (*Server, error) {
	s.pid, s.attached = pid, true
	tcp, http, err := configuredPorts(o.Dir)
	if err != nil {
		return nil, err
	}
	if tcp != o.TCPPort || http != o.HTTPPort {
		return nil, fmt.Errorf("the clickhouse server of %s from a previous run (pid %d) listens on ports %d and %d, not %d and %d; "+
			"Possible solutions: stop it (kill %d) so it restarts on the new ports, or keep its ports",
			o.Dir, pid, tcp, http, o.TCPPort, o.HTTPPort, pid)
	}
	if err := s.waitReady(ctx, o.StartTimeout); err != nil {
		return nil, fmt.Errorf("attach to the clickhouse server of %s (pid %d): %w; Possible solutions: stop it (kill %d) and start again",
			o.Dir, pid, err, pid)
	}
	return s, nil
}

// launch starts the server process and the goroutine that reaps it.
func (s *Server) launch(o Options, logs *logFiles) error {
	cmd := exec.Command(o.Binary.Path, o.Binary.Args(filepath.Join(o.Dir, configFile))...)
	cmd.Dir = o.Dir
	var out io.Writer = logs.console
	if o.Log != nil {
		out = io.MultiWriter(logs.console, o.Log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr(o.DieWithParent)

	started := make(chan error, 1)
	go func() {
		defer logs.console.Close()
		if o.DieWithParent {
			// The kernel sends Pdeathsig when the thread that forked the
			// child exits, not the process. The Go runtime may retire
			// threads, so this goroutine keeps its thread, from the fork
			// until the child is reaped; the thread ends with it.
			runtime.LockOSThread()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.exitErr = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("run %s: %w", o.Binary.Path, err)
	}
	s.pid = cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(o.Dir, pidFile), []byte(strconv.Itoa(s.pid)+"\n"), 0o640); err != nil {
		_ = s.Stop()
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// waitReady polls until the server answers a query on the HTTP port and
// accepts connections on the native port.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	for {
		if last = s.ping(ctx, client); last == nil {
			return nil
		}
		if s.attached && !alive(s.pid) {
			return errors.New("server exited before it answered")
		}
		select {
		case <-s.done:
			if s.exitErr != nil {
				return fmt.Errorf("server exited before it answered: %w", s.exitErr)
			}
			return errors.New("server exited before it answered")
		case <-ctx.Done():
			return fmt.Errorf("server did not answer within %s (last error: %v): %w", timeout, last, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (s *Server) ping(ctx context.Context, client *http.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.httpAddr+"/?query=SELECT%201", nil)
	if err != nil {
		panic("BUG: ping request: " + err.Error())
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "1" {
		return fmt.Errorf("SELECT 1 over HTTP: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.tcpAddr)
	if err != nil {
		return err
	}
	return c.Close()
}

// Addr returns the native-protocol address, host:port.
func (s *Server) Addr() string { return s.tcpAddr }

// HTTPAddr returns the HTTP interface's address, host:port.
func (s *Server) HTTPAddr() string { return s.httpAddr }

// Dir returns the server's directory.
func (s *Server) Dir() string { return s.dir }

// PID returns the server's process id.
func (s *Server) PID() int { return s.pid }

// Attached reports whether Start found this server already running rather
// than starting it.
func (s *Server) Attached() bool { return s.attached }

// Done returns a channel closed when the server process has exited.
func (s *Server) Done() <-chan struct{} {
	if s.attached {
		// Not our child, so there is no wait; poll for its end.
		s.watch.Do(func() {
			go func() {
				for alive(s.pid) {
					time.Sleep(50 * time.Millisecond)
				}
				close(s.done)
			}()
		})
	}
	return s.done
}

// Wait waits for the server process to exit and returns its exit status;
// it is always nil for an attached server, whose status is its parent's.
func (s *Server) Wait() error {
	<-s.Done()
	return s.exitErr
}

// Stop asks the server to shut down (SIGTERM), waits for it, and kills it
// (SIGKILL) if it has not exited after StopTimeout. It is safe to call
// more than once and after the server has exited.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		done := s.Done()
		s.signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(s.stopTimeout):
			s.signal(syscall.SIGKILL)
			<-done
			s.stopErr = fmt.Errorf("clickhouse server (pid %d) did not stop within %s of SIGTERM and was killed; its log is in %s",
				s.pid, s.stopTimeout, filepath.Join(s.dir, logDir))
		}
		s.removePID()
	})
	return s.stopErr
}

// Kill ends the server at once with SIGKILL, as a crash would, and waits
// for it to exit. Its data stays in Dir: a later Start on the same
// directory starts it again with what it had written. After Kill, Stop
// does nothing.
func (s *Server) Kill() {
	s.stopOnce.Do(func() {
		done := s.Done()
		s.signal(syscall.SIGKILL)
		<-done
		s.removePID()
	})
}

// removePID removes the pid file if it still names this server.
func (s *Server) removePID() {
	if pid, err := readPID(filepath.Join(s.dir, pidFile)); err == nil && pid == s.pid {
		_ = os.Remove(filepath.Join(s.dir, pidFile))
	}
}

// signal signals the server's process group (Start makes the server a
// group leader, so helpers it may spawn go too), falling back to the
// process alone.
func (s *Server) signal(sig syscall.Signal) {
	if s.pid <= 0 {
		return
	}
	if err := syscall.Kill(-s.pid, sig); err != nil {
		_ = syscall.Kill(s.pid, sig)
	}
}

// runningServer returns the pid of the server a previous Start left
// running in dir, if any: the pid file names a live process whose command
// line names dir's config.
func runningServer(dir string) (int, bool) {
	pid, err := readPID(filepath.Join(dir, pidFile))
	if err != nil || !alive(pid) {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, false
	}
	want := "--config-file=" + filepath.Join(dir, configFile)
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == want {
			return pid, true
		}
	}
	return 0, false
}

// readPID reads the pid a pid file at path holds.
func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("malformed pid file %q", b)
	}
	return pid, nil
}

// alive reports whether pid is a live process (not a zombie awaiting its
// parent's wait).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the parenthesised command name, which may itself
	// hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// configuredPorts reads the ports of the config a previous Start wrote.
func configuredPorts(dir string) (tcp, http int, err error) {
	b, err := os.ReadFile(filepath.Join(dir, configFile))
	if err != nil {
		return 0, 0, fmt.Errorf("read server config: %w", err)
	}
	var c struct {
		TCP  int `xml:"tcp_port"`
		HTTP int `xml:"http_port"`
	}
	if err := xml.Unmarshal(b, &c); err != nil {
		return 0, 0, fmt.Errorf("read server config %s: %w", filepath.Join(dir, configFile), err)
	}
	return c.TCP, c.HTTP, nil
}

// listening reports whether something accepts connections on addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
