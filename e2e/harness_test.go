package e2e

// Helpers shared by the tests that run joiner processes next to a stack
// and compare what they wrote with an uninterrupted run and the truth:
// the crash test and the fault tests.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// seedsFromEnv returns the comma-separated seeds in the environment
// variable env, or defaults when it is unset.
func seedsFromEnv(t *testing.T, env string, defaults []int64) []int64 {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return defaults
	}
	var seeds []int64
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, v, err)
		}
		seeds = append(seeds, n)
	}
	return seeds
}

// buildCommands builds the named commands (./cmd/<name>) into a temporary
// directory and returns it.
func buildCommands(t *testing.T, ctx context.Context, names ...string) string {
	t.Helper()
	bin := t.TempDir()
	args := []string{"build", "-o", bin + string(os.PathSeparator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// checkJoinerTables runs the reference: one joiner, never interrupted, in
// a fresh group writing to its own database, over the same topics. Once it
// has caught up, the finding tables js wrote must be identical to its
// (wall-clock columns aside), and both must equal the generator's truth.
// js must have caught up and stopped.
func checkJoinerTables(t *testing.T, ctx context.Context, s *stack.Stack, js *joinerSet, truth *fleet.Truth, start time.Time) {
	t.Helper()
	conn := testenv.Open(t, s.ClickHouse())
	refCfg := s.ClickHouse()
	refCfg.Database = "reference"
	refConn := testenv.Open(t, refCfg)
	if err := readmodel.Migrate(ctx, refConn, refCfg.Database); err != nil {
		t.Fatalf("migrate reference database: %v", err)
	}
	ref := &joinerSet{t: t, bin: js.bin, env: js.env, dir: js.dir, group: "reference-joiner", db: refCfg.Database, name: "reference"}
	t.Cleanup(ref.stopAll)
	ref.start()
	waitGroupCaughtUp(t, s.BrokerAddr(), ref.group, time.Minute)
	ref.checkAlive()
	ref.stopAll()
	t.Logf("reference run caught up at %v", time.Since(start).Round(time.Millisecond))

	// An operator's command is the one record whose place among the other
	// streams' records can differ between a live run and a replay: at the
	// live tail, a command produced a moment before an observation may
	// reach the broker after the joiner applied the observation (package
	// logmerge, the live-tail exception; docs/actions.md). Its effect is
	// the same; the version of the row it writes, a position, may not be,
	// nor, in the action's history row, the confirmations the finding had
	// counted when the command found it (retry_count). Action rows are
	// therefore matched by their command id, and those columns (the
	// version alone of a current row whose last change was an action) are
	// left out of the comparison; every other column must agree.
	for _, table := range []struct {
		name      string
		key       []string // expressions
		actionCol string
		relax     []string // of action rows
	}{
		{"drift_evidence", []string{"evidence_id"}, "last_action_id", []string{"version"}},
		{"node_agent_status", []string{"node_id"}, "", nil},
		{"drift_history", []string{"evidence_id", "if(action_id != '', action_id, toString(version))"}, "action_id", []string{"version", "retry_count"}},
	} {
		got := finalRows(t, ctx, conn, s.ClickHouse().Database, table.name, table.key)
		want := finalRows(t, ctx, conn, refCfg.Database, table.name, table.key)
		if table.actionCol != "" {
			relaxActionVersions(got, want, table.actionCol, table.relax...)
		}
		if table.name == "node_agent_status" {
			relaxRecentEvents(got, want)
		}
		if d := diffRows(got, want); d != "" {
			t.Errorf("%s after the schedule differs from the uninterrupted run (%d rows, reference %d):\n%s", table.name, len(got.rows), len(want.rows), d)
		} else {
			t.Logf("%s: %d rows identical to the uninterrupted run", table.name, len(got.rows))
		}
	}

	for _, db := range []string{s.ClickHouse().Database, refCfg.Database} {
		findings := evidenceFindings(t, ctx, conn, db)
		if diff := truth.Compare(findings, fleet.CompareOptions{}); !diff.Empty() {
			t.Errorf("findings in %s differ from the generator's ground truth (%d expected, %d found):\n%s", db, len(truth.Findings), len(findings), diff)
		}
	}
}

// joinerSet runs joiner processes of one consumer group.
type joinerSet struct {
	t     *testing.T
	bin   string
	env   []string
	dir   string
	group string
	db    string
	name  string // log name prefix; default "joiner"
	// liveHold is the joiners' -joiner.liveHold; 0: the default.
	liveHold time.Duration

	// late and holdsExpired sum the joiners' late records and expired
	// live-tail holds, as their /metrics said when they were stopped or
	// killed (what a joiner applied after that is not counted).
	late, holdsExpired float64

	n       int
	running []*joinerProc
	logs    []string
}

type joinerProc struct {
	id   int
	addr string // of /metrics
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (js *joinerSet) start() *joinerProc {
	t := js.t
	t.Helper()
	js.n++
	name := js.name
	if name == "" {
		name = "joiner"
	}
	logPath := filepath.Join(js.dir, fmt.Sprintf("%s-%d.log", name, js.n))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	args := []string{
		"-joiner.addr", addr,
		"-joiner.group", js.group,
		"-clickhouse.db", js.db,
		"-joiner.sessionTimeout", "6s",
		"-joiner.rebalanceTimeout", "10s",
		"-joiner.flushInterval", "100ms",
		"-joiner.flushEvents", "2000",
		// Catch-up rounds of a few regular ones, so the kills fall
		// inside longer rounds too, and between many commits.
		"-joiner.catchUpInterval", "400ms",
		"-joiner.catchUpEvents", "8000",
		// Small merge queues, so streams that run ahead are paused and
		// resumed through the kills and rebalances too.
		"-joiner.queueRecords", "64",
		// Current rows held at most a second while behind (30 s by
		// default): the holds still span kills and rebalances, and the
		// current tables the tests and the fault schedule's operator
		// read follow the joiners closely, where a hold restarted by
		// every rebalance could keep rows back for a whole schedule.
		"-joiner.catchUpHold", "1s",
	}
	if js.liveHold != 0 {
		args = append(args, "-joiner.liveHold", js.liveHold.String())
	}
	cmd := exec.Command(js.bin, args...)
	cmd.Env = js.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start joiner: %v", err)
	}
	p := &joinerProc{id: js.n, addr: addr, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	js.running = append(js.running, p)
	js.logs = append(js.logs, logPath)
	return p
}

// step runs step i of a schedule.
func (js *joinerSet) step(i int, a crashAction) {
	t := js.t
	t.Helper()
	switch a.kind {
	case "add":
		p := js.start()
		t.Logf("step %d: started joiner #%d (%d running)", i, p.id, len(js.running))
	case "kill":
		p := js.running[a.target]
		js.count(p)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		js.running = slices.Delete(js.running, a.target, a.target+1)
		q := js.start()
		t.Logf("step %d: killed joiner #%d, started #%d (%d running)", i, p.id, q.id, len(js.running))
	case "term":
		p := js.running[a.target]
		js.stop(p)
		js.running = slices.Delete(js.running, a.target, a.target+1)
		t.Logf("step %d: stopped joiner #%d (%d running)", i, p.id, len(js.running))
	}
}

// stop sends SIGTERM and waits for a clean exit. A joiner that has not
// come up yet is waited for first (up to 30s): before it handles SIGTERM
// the signal's default action ends it, which is not the clean stop this
// checks.
func (js *joinerSet) stop(p *joinerProc) {
	p.waitUp(30 * time.Second)
	js.count(p)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			b, _ := os.ReadFile(p.log)
			js.t.Errorf("joiner #%d exited with %v after SIGTERM; log:\n%s", p.id, p.err, tail(string(b), 2000))
		}
	case <-time.After(30 * time.Second):
		// SIGQUIT makes the Go runtime print every goroutine: where it hangs.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		b, _ := os.ReadFile(p.log)
		js.t.Errorf("joiner #%d did not stop within 30s of SIGTERM; log with goroutines:\n%s", p.id, tail(string(b), 30000))
	}
}

// waitUp waits until p answers on its ops listener (it handles signals
// from before it listens), it exits, or d has passed.
func (p *joinerProc) waitUp(d time.Duration) {
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if resp, err := c.Get("http://" + p.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// count adds p's late records and expired holds, as its /metrics says
// now, to the set's; a joiner that does not answer adds nothing.
func (js *joinerSet) count(p *joinerProc) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "driftline_joiner_late_records_total":
			js.late += f
		case "driftline_joiner_live_holds_expired_total":
			js.holdsExpired += f
		}
	}
}

// checkAlive fails the test if a joiner exited on its own.
func (js *joinerSet) checkAlive() {
	for _, p := range js.running {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			js.t.Errorf("joiner #%d exited on its own: %v; log:\n%s", p.id, p.err, tail(string(b), 2000))
		default:
		}
	}
}

func (js *joinerSet) stopAll() {
	for _, p := range js.running {
		js.stop(p)
	}
	js.running = nil
}

// dumpLogs logs the tail of every joiner's log. Joiners still running
// get SIGQUIT first, so that their logs end with their goroutines: where
// a member that did not catch up was waiting.
func (js *joinerSet) dumpLogs() {
	for _, p := range js.running {
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	for _, path := range js.logs {
		if b, err := os.ReadFile(path); err == nil {
			js.t.Logf("--- %s (tail) ---\n%s", filepath.Base(path), tail(string(b), 3000))
		}
	}
}

// waitGroupCaughtUp waits up to timeout until group has committed every
// record of the joined topics.
func waitGroupCaughtUp(t *testing.T, broker, group string, timeout time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	names := contract.DefaultTopics()
	testenv.CheckFor(t, timeout, func() error {
		lags, err := adm.Lag(context.Background(), group)
		if err != nil {
			return err
		}
		l, ok := lags[group]
		if !ok || l.FetchErr != nil || l.DescribeErr != nil {
			return fmt.Errorf("group %s: %v %v", group, l.FetchErr, l.DescribeErr)
		}
		var total int64
		var behind []string
		for _, topic := range names.Joined() {
			// A group that has not joined yet has no lag at all; it is
			// caught up only once it has committed on every partition.
			if n := len(l.Lag[topic]); n < crashPartitions {
				return fmt.Errorf("%s: lag known for %d of %d partitions", topic, n, crashPartitions)
			}
			for _, pl := range l.Lag[topic] {
				if pl.End.Offset > 0 && pl.Commit.At < 0 {
					return fmt.Errorf("%s/%d: nothing committed yet", topic, pl.Partition)
				}
				total += pl.Lag
				if pl.Lag > 0 {
					behind = append(behind, fmt.Sprintf("%s/%d=%d", topic, pl.Partition, pl.Lag))
				}
			}
		}
		if total > 0 {
			var members []string
			for _, m := range l.Members {
				a, _ := m.Assigned.AsConsumer()
				var ps []string
				for _, t := range a.Topics {
					ps = append(ps, fmt.Sprintf("%s%v", t.Topic, t.Partitions))
				}
				members = append(members, fmt.Sprintf("%s@%s %s", m.ClientID, m.ClientHost, strings.Join(ps, " ")))
			}
			return fmt.Errorf("lag %d: %s; group %s: %s", total, strings.Join(behind, ", "), l.State, strings.Join(members, "; "))
		}
		return nil
	})
}

// tableRows are the current rows of a table as text, by key.
// relaxActionVersions blanks cols (the version, and what else a row
// records of the moment its command applied) in the rows of got and want
// that an operator action wrote last (actionCol non-empty) where the two
// rows differ in nothing else.
func relaxActionVersions(got, want tableRows, actionCol string, cols ...string) {
	ai := slices.Index(got.columns, actionCol)
	if ai < 0 || !slices.Equal(got.columns, want.columns) {
		return
	}
	var idx []int
	for _, c := range cols {
		if i := slices.Index(got.columns, c); i >= 0 {
			idx = append(idx, i)
		}
	}
	for k, g := range got.rows {
		w, ok := want.rows[k]
		if !ok || g[ai] == "" || g[ai] != w[ai] || slices.Equal(g, w) {
			continue
		}
		gk, wk := slices.Clone(g), slices.Clone(w)
		for _, i := range idx {
			g[i], w[i] = "", ""
		}
		if !slices.Equal(g, w) {
			copy(g, gk)
			copy(w, wk)
		}
	}
}

// relaxRecentEvents accepts a node's recent_events in another order when
// they are the same events: the ring keeps the order the joiner applied
// them in, and at the merge's live tail (docs/drift-model.md, limits) a
// live joiner may apply an observation and a heartbeat of one moment in
// either order, which a replay orders by timestamp.
func relaxRecentEvents(got, want tableRows) {
	ri := slices.Index(got.columns, "recent_events")
	if ri < 0 || !slices.Equal(got.columns, want.columns) {
		return
	}
	for k, g := range got.rows {
		w, ok := want.rows[k]
		if !ok || ri >= len(g) || ri >= len(w) || g[ri] == w[ri] {
			continue
		}
		a, b := strings.Split(strings.Trim(g[ri], "[]"), ","), strings.Split(strings.Trim(w[ri], "[]"), ",")
		slices.Sort(a)
		slices.Sort(b)
		if slices.Equal(a, b) {
			g[ri] = w[ri]
		}
	}
}

type tableRows struct {
	columns []string
	rows    map[string][]string
}

// finalRows reads db.table with FINAL, every column but the wall-clock
// updated_at, as text.
func finalRows(t *testing.T, ctx context.Context, conn driver.Conn, db, table string, key []string) tableRows {
	t.Helper()
	rows, err := conn.Query(ctx, "SELECT name FROM system.columns WHERE database = ? AND table = ? ORDER BY name", db, table)
	if err != nil {
		t.Fatalf("columns of %s.%s: %v", db, table, err)
	}
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		if c != "updated_at" {
			cols = append(cols, c)
		}
	}
	rows.Close()
	if len(cols) == 0 {
		t.Fatalf("%s.%s has no columns", db, table)
	}
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = "toString(" + c + ")"
	}
	var keyExprs []string
	for _, k := range key {
		keyExprs = append(keyExprs, "toString("+k+")")
	}
	q := fmt.Sprintf("SELECT concat(%s, '\\x00', %s) FROM %s.%s FINAL",
		strings.Join(keyExprs, ", '/', "), strings.Join(exprs, ", '\\x01', "), db, table)
	rows, err = conn.Query(ctx, q)
	if err != nil {
		t.Fatalf("read %s.%s: %v\n%s", db, table, err, q)
	}
	defer rows.Close()
	out := tableRows{columns: cols, rows: map[string][]string{}}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		k, v, _ := strings.Cut(line, "\x00")
		out.rows[k] = strings.Split(v, "\x01")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffRows describes up to 20 differences between got and want.
func diffRows(got, want tableRows) string {
	var b strings.Builder
	n := 0
	note := func(format string, args ...any) {
		if n < 20 {
			fmt.Fprintf(&b, format+"\n", args...)
		}
		n++
	}
	keys := make([]string, 0, len(got.rows)+len(want.rows))
	for k := range got.rows {
		keys = append(keys, k)
	}
	for k := range want.rows {
		if _, ok := got.rows[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		g, gok := got.rows[k]
		w, wok := want.rows[k]
		switch {
		case !gok:
			note("  %s: missing (reference: %s)", k, strings.Join(w, " | "))
		case !wok:
			note("  %s: unexpected (%s)", k, strings.Join(g, " | "))
		default:
			var fields []string
			for i := range g {
				if i < len(w) && g[i] != w[i] {
					fields = append(fields, fmt.Sprintf("%s=%q (reference %q)", got.columns[i], g[i], w[i]))
				}
			}
			if len(fields) > 0 {
				note("  %s: %s", k, strings.Join(fields, ", "))
			}
		}
	}
	if n > 20 {
		fmt.Fprintf(&b, "  ... %d more\n", n-20)
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d differing keys:\n%s", n, b.String())
}

// evidenceFindings reads drift_evidence as fleet findings.
func evidenceFindings(t *testing.T, ctx context.Context, conn driver.Conn, db string) []fleet.Finding {
	t.Helper()
	out, err := fleet.ReadFindings(ctx, conn, db)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// feedPaced feeds gen through the stack's gateway in the background, in
// batches of batch lines with a pause after each, so that what a test does
// meanwhile lands in the middle of the stream. The returned function waits
// for the feed to end and returns its stats.
func feedPaced(ctx context.Context, s *stack.Stack, gen *fleet.Generator, batch int, pause time.Duration) func() (fleet.FeedStats, error) {
	type result struct {
		stats fleet.FeedStats
		err   error
	}
	done := make(chan result, 1)
	go func() {
		stats, err := fleet.Feed(ctx, s.IngestURL(), service.DefaultLocalAPIKey, gen, fleet.FeedOptions{
			BatchLines: batch,
			Progress:   func(fleet.FeedStats) { time.Sleep(pause) },
		})
		done <- result{stats, err}
	}()
	return func() (fleet.FeedStats, error) {
		r := <-done
		return r.stats, r.err
	}
}

// newGenerator returns the fleet generator of cfg and its ground truth.
func newGenerator(t *testing.T, cfg fleet.Config) (*fleet.Generator, *fleet.Truth) {
	t.Helper()
	gen, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gen, gen.Truth()
}
