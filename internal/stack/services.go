package stack

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/driftline/driftline/internal/chserver"
)

// startService runs bin/<name> and waits until its /healthz answers 200.
// Services are configured only through the environment (DRIFTLINE_*), so
// the stack needs no knowledge of their flags.
func (s *Stack) startService(ctx context.Context, name string) error {
	path, err := s.binary(name)
	if err != nil {
		return err
	}
	addr, _ := s.opts.serviceAddr(name)
	s.logf("starting %s on %s", name, addr)
	p, err := s.spawn(procSpec{name: name, path: path, env: s.serviceEnv(name), log: s.logPath(name)})
	if err != nil {
		return err
	}
	return waitHealthy(ctx, p, "http://"+addr+"/healthz", s.opts.StartTimeout)
}

// waitHealthy polls url until it answers 200, p exits, or timeout passes.
func waitHealthy(ctx context.Context, p *process, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("health check %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if p.exited() {
			return withTail(fmt.Errorf("%s exited at start: %s", p.spec.name, exitStatus(p.waitErr)), p.spec.log)
		}
		select {
		case <-ctx.Done():
			return withTail(fmt.Errorf("%s not healthy within %s (%s: %s)", p.spec.name, timeout, url, last), p.spec.log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serviceEnv is childEnv with the ClickHouse user of the service when the
// stack runs its own server: the query service reads as the read-only
// user and appends its audit log as the audit user, the joiner and the
// rater write as the writer user (chserver's users). Options.Env still
// wins.
func (s *Stack) serviceEnv(name string) []string {
	env := s.childEnv()
	if s.opts.ExternalClickHouse {
		return env
	}
	var users []string
	switch name {
	case NameQuery:
		users = []string{"DRIFTLINE_CLICKHOUSE_USER=" + chserver.ReaderUser, "DRIFTLINE_CLICKHOUSE_PASSWORD=",
			"DRIFTLINE_QUERY_AUDIT_USER=" + chserver.AuditUser, "DRIFTLINE_QUERY_AUDIT_PASSWORD="}
	case NameJoiner, NameRater:
		users = []string{"DRIFTLINE_CLICKHOUSE_USER=" + chserver.WriterUser, "DRIFTLINE_CLICKHOUSE_PASSWORD="}
	default:
		return env
	}
	return append(append(env, users...), s.opts.Env...)
}
