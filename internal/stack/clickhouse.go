package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/driftline/driftline/internal/chserver"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// installTimeout bounds apt-get update and install on a fresh machine.
const installTimeout = 15 * time.Minute

// startClickHouse finds (or installs) the server binary and starts the
// stack's own server with its data under Dir/clickhouse. chserver attaches
// to a server a previous run left on the same directory instead of
// starting a second one.
func (s *Stack) startClickHouse(ctx context.Context) error {
	bin, err := chserver.Find()
	if errors.Is(err, chserver.ErrNotFound) && !s.opts.NoInstall && os.Geteuid() == 0 {
		s.logf("ClickHouse not found: installing clickhouse-server with apt-get (log: %s)", s.logPath("install"))
		lf, ferr := os.OpenFile(s.logPath("install"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if ferr != nil {
			return fmt.Errorf("open install log: %w", ferr)
		}
		ictx, cancel := context.WithTimeout(ctx, installTimeout)
		err = chserver.Install(ictx, lf)
		cancel()
		lf.Close()
		if err != nil {
			// Another process (a parallel test) may have installed it
			// while apt's lock kept us out.
			if b, ferr := chserver.Find(); ferr == nil {
				bin, err = b, nil
			} else {
				return withTail(fmt.Errorf("install ClickHouse: %w", err), s.logPath("install"))
			}
		} else {
			bin, err = chserver.Find()
		}
	}
	if err != nil {
		return fmt.Errorf("find ClickHouse: %w", err)
	}

	s.logf("starting ClickHouse %s on %s (http %s), data in %s", bin.Path, s.opts.ClickHouseAddr, s.opts.ClickHouseHTTPAddr, s.clickHouseDir())
	lf, err := os.OpenFile(s.logPath(NameClickHouse), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open ClickHouse log: %w", err)
	}
	s.chLog = lf
	srv, err := chserver.Start(ctx, chserver.Options{
		Dir:      s.clickHouseDir(),
		TCPPort:  portOf(s.opts.ClickHouseAddr),
		HTTPPort: portOf(s.opts.ClickHouseHTTPAddr),
		Binary:   bin,
		Log:      lf,
	})
	if err != nil {
		return fmt.Errorf("start ClickHouse: %w", err)
	}
	s.ch = srv
	if srv.Attached() {
		s.logf("attached to the ClickHouse server left running in %s (pid %d)", s.clickHouseDir(), srv.PID())
	}
	stopping := new(atomic.Bool)
	s.chStopping = stopping
	s.mu.Lock()
	s.setChild(ChildStatus{Name: NameClickHouse, Pid: srv.PID(), Log: s.logPath(NameClickHouse)})
	s.mu.Unlock()
	go func() {
		<-srv.Done()
		if stopping.Load() {
			return
		}
		s.onExitErr(&ExitError{Name: NameClickHouse, Pid: srv.PID(), Log: filepath.Join(s.clickHouseDir(), "log"), Err: srv.Wait()})
	}()
	return nil
}

// migrate applies the read-model schema; it is idempotent, so every start
// runs it and a stack upgraded in place gets new tables.
func (s *Stack) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	cfg := s.ClickHouse()
	// The server answers before it accepts every query; retry connecting,
	// but not a failing migration, which would fail the same way again.
	for {
		conn, err := readmodel.Open(ctx, cfg)
		if err == nil {
			conn.Close()
			err = readmodel.OpenMigrate(ctx, cfg)
			if err != nil {
				return fmt.Errorf("migrate ClickHouse at %s: %w", cfg.Addr, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connect to ClickHouse at %s: %w", cfg.Addr, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stopClickHouse stops the stack's ClickHouse server: with SIGTERM and
// the server's grace, or at once with SIGKILL when kill is set.
func (s *Stack) stopClickHouse(kill bool) error {
	if s.ch == nil {
		return nil
	}
	s.chStopping.Store(true)
	var err error
	if kill {
		s.ch.Kill()
	} else {
		err = s.ch.Stop()
	}
	s.ch = nil
	if s.chLog != nil {
		s.chLog.Close()
		s.chLog = nil
	}
	return err
}

func (s *Stack) clickHouseDir() string { return filepath.Join(s.opts.Dir, NameClickHouse) }

// ClickHouse returns the connection settings of the stack's ClickHouse.
func (s *Stack) ClickHouse() service.ClickHouse {
	return service.ClickHouse{
		Addr:     s.opts.ClickHouseAddr,
		Database: s.opts.Database,
		User:     s.opts.ClickHouseUser,
		Password: s.opts.ClickHousePassword,
		Cluster:  s.opts.ClickHouseCluster,
	}
}
