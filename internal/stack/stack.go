package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftline/driftline/internal/chserver"
)

// Stack is a running local stack. Start returns it healthy; Stop takes it
// down in reverse order. A child that exits on its own is not restarted:
// it is logged and sent on Exited.
type Stack struct {
	opts Options

	lock  *os.File         // flock on Dir/stack.lock, held for the lifetime
	ch    *chserver.Server // nil with ExternalClickHouse
	chLog *os.File         // ClickHouse's console log

	chStopping *atomic.Bool // set before the running ClickHouse is stopped on purpose

	// compMu serialises Stop and the one-component operations (Kill,
	// StopComponent, StartComponent), which replace ch and procs entries.
	compMu sync.Mutex
	// mu protects procs, state and stopped.
	mu      sync.Mutex
	procs   []*process // started children, in start order
	state   State
	stopped bool

	exited chan *ExitError // unexpected exits, buffered; never closed
}

// Start brings the stack up in order, each step waiting until the previous
// component is ready: ClickHouse (found, installed when absent and allowed,
// started), migrations, the broker (answers Kafka requests, topics exist),
// then each service (its /healthz answers 200). On error every component
// already started is stopped again, and the error names the component and
// ends with the tail of its log.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	s, err := newStack(opts)
	if err != nil {
		return nil, err
	}
	opts = s.opts
	if err := s.start(ctx); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*opts.StopTimeout)
		defer cancel()
		if serr := s.Stop(stopCtx); serr != nil {
			err = fmt.Errorf("%w (stopping what started: %v)", err, serr)
		}
		return nil, err
	}
	s.mu.Lock()
	s.state.Status = StatusReady
	err = writeState(opts.Dir, s.state)
	s.mu.Unlock()
	if err != nil {
		_ = s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	s.logf("stack ready: ingest %s, query %s, broker %s, ClickHouse %s", s.IngestURL(), s.QueryURL(), opts.BrokerAddr, opts.ClickHouseAddr)
	return s, nil
}

// newStack validates opts, takes the state directory's lock and publishes
// the initial state; it starts nothing.
func newStack(opts Options) (*Stack, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "log"), 0o755); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if errors.Is(err, ErrRunning) {
		st, _, _ := ReadState(opts.Dir)
		return nil, fmt.Errorf("%w (%s, supervisor pid %d); Possible solutions: stop it with `stack down`, or use another state directory (%s)", ErrRunning, opts.Dir, st.Pid, EnvDir)
	}
	if err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, lock: lock, exited: make(chan *ExitError, 16)}
	// A previous supervisor that died leaves its state file; its children
	// may still hold the ports. Its ClickHouse server is kept: Start
	// attaches to it.
	if old, _, err := ReadState(opts.Dir); err == nil {
		s.logf("cleaning up after a supervisor (pid %d) that did not stop", old.Pid)
		stopStale(old.Children, opts.StopTimeout, NameClickHouse)
	}
	s.state = State{
		Pid:        os.Getpid(),
		Status:     StatusStarting,
		StartedAt:  time.Now().UTC(),
		Dir:        opts.Dir,
		Broker:     opts.BrokerAddr,
		ClickHouse: opts.ClickHouseAddr,
		HTTP:       opts.ClickHouseHTTPAddr,
		Database:   opts.Database,
	}
	for _, svc := range opts.Services {
		addr, _ := opts.serviceAddr(svc)
		switch svc {
		case NameIngest:
			s.state.Ingest = "http://" + addr
		case NameQuery:
			s.state.Query = "http://" + addr
		case NameJoiner:
			s.state.Joiner = "http://" + addr
		case NameRater:
			s.state.Rater = "http://" + addr
		}
	}
	if err := s.publish(); err != nil {
		unlock(lock)
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context) error {
	if s.opts.ExternalClickHouse {
		s.logf("using the ClickHouse at %s", s.opts.ClickHouseAddr)
	} else if err := s.startClickHouse(ctx); err != nil {
		return err
	}
	s.logf("applying migrations to database %s", s.opts.Database)
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if s.opts.ExternalBroker {
		s.logf("using the broker at %s", s.opts.BrokerAddr)
		if err := s.waitBroker(ctx, nil); err != nil {
			return err
		}
	} else if err := s.startBroker(ctx); err != nil {
		return err
	}
	for _, svc := range s.opts.Services {
		if err := s.startService(ctx, svc); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the services in reverse start order, then the broker, then
// ClickHouse: each child gets SIGTERM and StopTimeout to flush and exit
// before it is killed. Stop is safe to call more than once.
func (s *Stack) Stop(ctx context.Context) error {
	s.compMu.Lock()
	defer s.compMu.Unlock()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.state.Status = StatusStopping
	_ = writeState(s.opts.Dir, s.state)
	procs := s.procs
	s.mu.Unlock()

	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		s.logf("stopping %s (pid %d)", p.spec.name, p.pid())
		if err := p.stop(ctx, s.opts.StopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ch != nil {
		s.logf("stopping ClickHouse")
		if err := s.stopClickHouse(false); err != nil {
			errs = append(errs, fmt.Errorf("stop ClickHouse: %w", err))
		}
	}
	_ = os.Remove(filepath.Join(s.opts.Dir, stateFile))
	unlock(s.lock)
	s.logf("stack stopped")
	return errors.Join(errs...)
}

// WaitAndStop runs until ctx ends, reporting to out each child that exits
// on its own (the rest keep running), then stops the stack in order,
// giving the stop two minutes.
func (s *Stack) WaitAndStop(ctx context.Context, out io.Writer) error {
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

// Exited delivers a child that stopped without being asked to. The stack
// does not restart it; the caller decides whether to stop everything.
func (s *Stack) Exited() <-chan *ExitError { return s.exited }

// Options returns the options the stack runs with, defaults filled in and
// free ports resolved.
func (s *Stack) Options() Options { return s.opts }

// Dir returns the absolute state directory.
func (s *Stack) Dir() string { return s.opts.Dir }

// BrokerAddr returns the broker's host:port (DRIFTLINE_BROKERS).
func (s *Stack) BrokerAddr() string { return s.opts.BrokerAddr }

// ClickHouseAddr returns ClickHouse's native-protocol host:port.
func (s *Stack) ClickHouseAddr() string { return s.opts.ClickHouseAddr }

// IngestURL returns the base URL of the ingest gateway.
func (s *Stack) IngestURL() string { return "http://" + s.opts.IngestAddr }

// QueryURL returns the base URL of the query API.
func (s *Stack) QueryURL() string { return "http://" + s.opts.QueryAddr }

// RaterURL returns the base URL of the rater's health and metrics.
func (s *Stack) RaterURL() string { return "http://" + s.opts.RaterAddr }

// LogPath returns the log file of a child (clickhouse, broker, ingest, ...).
func (s *Stack) LogPath(name string) string { return s.logPath(name) }

// State returns what the stack publishes in its state file.
func (s *Stack) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.Children = append([]ChildStatus(nil), s.state.Children...)
	return st
}

// Env returns the DRIFTLINE_* settings the services run with, as KEY=VALUE:
// a test can run another pipeline binary against the same stack with them.
func (s *Stack) Env() []string {
	o := s.opts
	env := []string{
		"DRIFTLINE_ENV=" + o.Environment,
		"DRIFTLINE_BROKERS=" + o.BrokerAddr,
		"DRIFTLINE_PARTITIONS=" + strconv.Itoa(o.Partitions),
		"DRIFTLINE_CLICKHOUSE_ADDR=" + o.ClickHouseAddr,
		EnvClickHouseHTTP + "=" + o.ClickHouseHTTPAddr,
		"DRIFTLINE_CLICKHOUSE_DB=" + o.Database,
		"DRIFTLINE_CLICKHOUSE_USER=" + o.ClickHouseUser,
		"DRIFTLINE_CLICKHOUSE_PASSWORD=" + o.ClickHousePassword,
		"DRIFTLINE_CLICKHOUSE_CLUSTER=" + o.ClickHouseCluster,
		"DRIFTLINE_INGEST_ADDR=" + o.IngestAddr,
		"DRIFTLINE_QUERY_ADDR=" + o.QueryAddr,
		"DRIFTLINE_JOINER_ADDR=" + o.JoinerAddr,
		"DRIFTLINE_RATER_ADDR=" + o.RaterAddr,
		EnvDir + "=" + o.Dir,
	}
	return append(env, o.Env...)
}

// childEnv is the environment of every child: the supervisor's own, then
// the stack's settings, then Options.Env. Later entries win in os/exec.
func (s *Stack) childEnv() []string {
	return append(os.Environ(), s.Env()...)
}

func (s *Stack) logPath(name string) string {
	return filepath.Join(s.opts.Dir, "log", name+".log")
}

func (s *Stack) logf(format string, args ...any) {
	fmt.Fprintf(s.opts.Log, "%s stack: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// spawn starts a child and records it in the state file.
func (s *Stack) spawn(spec procSpec) (*process, error) {
	p, err := startProcess(spec, s.onExit)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A component started again takes its predecessor's place, so Stop
	// keeps the reverse start order.
	replaced := false
	for i, old := range s.procs {
		if old.spec.name == spec.name && old.exited() {
			s.procs[i] = p
			replaced = true
			break
		}
	}
	if !replaced {
		s.procs = append(s.procs, p)
	}
	s.setChild(ChildStatus{Name: spec.name, Pid: p.pid(), Log: spec.log})
	return p, writeState(s.opts.Dir, s.state)
}

// setChild records c in the state, replacing the entry of the same name.
// The caller holds mu.
func (s *Stack) setChild(c ChildStatus) {
	for i := range s.state.Children {
		if s.state.Children[i].Name == c.Name {
			s.state.Children[i] = c
			return
		}
	}
	s.state.Children = append(s.state.Children, c)
}

func (s *Stack) onExit(p *process) { s.onExitErr(p.exitError()) }

func (s *Stack) onExitErr(e *ExitError) {
	s.logf("%v", e)
	select {
	case s.exited <- e:
	default: // nobody listens and the buffer is full; the log line stays
	}
}

func (s *Stack) publish() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return writeState(s.opts.Dir, s.state)
}

// binary returns the path of an executable in BinDir, or an error that says
// how to build it.
func (s *Stack) binary(name string) (string, error) {
	p := filepath.Join(s.opts.BinDir, name)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%s not found; Possible solutions: run `make build`, or point %s at the directory holding the binaries", p, EnvBinDir)
	}
	return p, nil
}
