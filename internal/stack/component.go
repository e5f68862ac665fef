package stack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrComponentState is returned when a one-component operation finds the
// component in the wrong state: stopping one that does not run, starting
// one that runs, or touching one the stack does not manage.
var ErrComponentState = errors.New("component state")

// Kill ends one component (clickhouse, broker or a service) at once with
// SIGKILL, as a crash would, and waits until it has exited. Its data stays:
// StartComponent brings it back on the same addresses and data. A killed
// component is not reported on Exited.
func (s *Stack) Kill(name string) error {
	return s.stopComponent(context.Background(), name, true)
}

// StopComponent stops one component as Stop does (SIGTERM, then SIGKILL
// after the grace period) and leaves the rest running.
func (s *Stack) StopComponent(ctx context.Context, name string) error {
	return s.stopComponent(ctx, name, false)
}

func (s *Stack) stopComponent(ctx context.Context, name string, kill bool) error {
	s.compMu.Lock()
	defer s.compMu.Unlock()
	if err := s.checkComponent(name); err != nil {
		return err
	}
	if name == NameClickHouse {
		if s.ch == nil {
			return fmt.Errorf("%w: ClickHouse is not running", ErrComponentState)
		}
		s.logf("%s ClickHouse (pid %d)", verb(kill), s.ch.PID())
		return s.stopClickHouse(kill)
	}
	p := s.running(name)
	if p == nil {
		return fmt.Errorf("%w: %s is not running", ErrComponentState, name)
	}
	s.logf("%s %s (pid %d)", verb(kill), name, p.pid())
	if !kill {
		return p.stop(ctx, s.opts.StopTimeout)
	}
	p.stopping.Store(true)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, p.pid())
	}
}

func verb(kill bool) string {
	if kill {
		return "killing (SIGKILL)"
	}
	return "stopping"
}

// StartComponent starts a component that Kill or StopComponent stopped, or
// that exited on its own, with the settings, addresses and data it had,
// and waits until it is ready as Start does: ClickHouse answers a query,
// the broker serves the topics, a service answers /healthz.
func (s *Stack) StartComponent(ctx context.Context, name string) error {
	s.compMu.Lock()
	defer s.compMu.Unlock()
	if err := s.checkComponent(name); err != nil {
		return err
	}
	switch name {
	case NameClickHouse:
		if s.ch != nil {
			return fmt.Errorf("%w: ClickHouse is already running", ErrComponentState)
		}
		return s.startClickHouse(ctx)
	case NameBroker:
		if s.running(name) != nil {
			return fmt.Errorf("%w: the broker is already running", ErrComponentState)
		}
		return s.startBroker(ctx)
	}
	if s.running(name) != nil {
		return fmt.Errorf("%w: %s is already running", ErrComponentState, name)
	}
	return s.startService(ctx, name)
}

// checkComponent refuses components this stack does not run itself.
func (s *Stack) checkComponent(name string) error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	switch {
	case stopped:
		return fmt.Errorf("%w: the stack is stopped", ErrComponentState)
	case name == NameClickHouse && s.opts.ExternalClickHouse:
		return fmt.Errorf("%w: ClickHouse is external, not run by the stack", ErrComponentState)
	case name == NameBroker && s.opts.ExternalBroker:
		return fmt.Errorf("%w: the broker is external, not run by the stack", ErrComponentState)
	case name == NameClickHouse, name == NameBroker, slices.Contains(s.opts.Services, name):
		return nil
	}
	return fmt.Errorf("%w: the stack runs no component %q", ErrComponentState, name)
}

// running returns the live process of the named child, or nil.
func (s *Stack) running(name string) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.spec.name == name && !p.exited() {
			return p
		}
	}
	return nil
}
