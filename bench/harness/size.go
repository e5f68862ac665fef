package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/freeport"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

// env is what the phases of one data set share.
type env struct {
	o     options
	dir   string
	st    *stack.Stack
	conn  driver.Conn
	adm   *kadm.Client
	names contract.Topics
	// infra are the broker's and ClickHouse's pids, charged per phase.
	infra map[string]int
	truth *fleet.Truth
	// joinerCounts are the findings per classification of the first
	// joiner phase.
	joinerCounts map[string]int
}

func runSize(ctx context.Context, o options, runDir string, size int, latency bool, rep *report) (*sizeResult, error) {
	name := sizeName(size)
	// A leading underscore keeps `go build ./...` and `go vet ./...` from
	// walking the stack's data while a run writes or deletes it.
	dir := filepath.Join(runDir, "_"+name)
	logf := func(format string, args ...any) { log.Printf(name+": "+format, args...) }
	res := &sizeResult{Name: name}

	cfg, unit := fleetConfig(o, size)
	res.Unit, res.Rounds = unit, cfg.Rounds
	g, err := fleet.New(cfg)
	if err != nil {
		return nil, err
	}
	res.Identities = cfg.Domains * (cfg.NodesPerDomain + cfg.AppsPerDomain + cfg.VolumesPerDomain + cfg.EndpointsPerDomain)
	res.FleetFlags = fmt.Sprintf("-fleet.domains %d -fleet.nodes %d -fleet.apps %d -fleet.volumes %d -fleet.endpoints %d",
		cfg.Domains, cfg.NodesPerDomain, cfg.AppsPerDomain, cfg.VolumesPerDomain, cfg.EndpointsPerDomain)
	if cfg.Rounds != fleet.DefaultConfig().Rounds {
		res.FleetFlags += fmt.Sprintf(" -fleet.rounds %d", cfg.Rounds)
	}
	if cfg.UsagePerResource != fleet.DefaultConfig().UsagePerResource {
		res.FleetFlags += fmt.Sprintf(" -fleet.usagePerResource %d", cfg.UsagePerResource)
	}
	if o.ledger {
		res.FleetFlags += " -fleet.ledger"
	}

	logf("starting the stack (ClickHouse, broker; %d partitions) in %s", o.partitions, dir)
	st, err := stack.Start(ctx, stack.Options{
		Dir:        dir,
		BinDir:     o.binDir,
		FreePorts:  true,
		Partitions: o.partitions,
		Services:   []string{},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := st.Stop(sctx); err != nil {
			logf("stop stack: %v", err)
		}
	}()
	e := &env{o: o, dir: dir, st: st, names: contract.DefaultTopics(), infra: map[string]int{}}
	for _, c := range st.State().Children {
		if c.Name == stack.NameBroker || c.Name == stack.NameClickHouse {
			e.infra[c.Name] = c.Pid
		}
	}
	if e.conn, err = readmodel.Open(ctx, st.ClickHouse()); err != nil {
		return res, err
	}
	defer e.conn.Close()
	if rep.Machine.ClickHouse == "" {
		rep.Machine.ClickHouse = clickHouseVersion(ctx, e.conn)
	}
	acl, err := kgo.NewClient(kgo.SeedBrokers(st.BrokerAddr()))
	if err != nil {
		return res, err
	}
	defer acl.Close()
	e.adm = kadm.NewClient(acl)

	logf("computing the ground truth of %d identities", res.Identities)
	e.truth = g.Truth()
	res.TruthFindings = len(e.truth.Findings)
	res.TruthCounts = e.truth.Counts

	logf("generating and producing to %s", st.BrokerAddr())
	mark := markCPU(e.infra)
	res.Produce, err = produceFleet(ctx, st.BrokerAddr(), e.names, int32(o.partitions), g)
	res.ProduceUsage = mark.since()
	if err != nil {
		return res, err
	}
	// The generator's plan is the largest thing the harness holds; the
	// phases need only the truth, and the processes they measure need the
	// memory.
	g = nil
	res.HarnessPeakRSS, _ = peakRSS(os.Getpid())
	debug.FreeOSMemory()
	if rss, err := statusField(os.Getpid(), "VmRSS:"); err == nil {
		logf("harness: peak RSS %s generating, %s resident after freeing the plan", gib(res.HarnessPeakRSS), gib(rss))
	}
	for _, t := range e.names.Joined() {
		res.JoinedRecords += res.Produce.ByTopic[t]
	}
	logf("produced %d events (%d records, %d to the joined topics) in %.1fs: %.0f records/s (generating alone %.1fs)",
		res.Produce.Lines, res.Produce.Records, res.JoinedRecords, res.Produce.Seconds, float64(res.Produce.Records)/res.Produce.Seconds, res.Produce.GenSecond)

	var errs []error
	// failed records a phase's error and says it at once; the other
	// phases still run.
	failed := func(phase string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", phase, err))
			logf("%s: %v", phase, err)
		}
	}
	for i, n := range o.joiners {
		if ctx.Err() != nil {
			break
		}
		if i > 0 && size > o.scalingUpTo {
			logf("skipping %d joiner(s): size above -scaling.upTo", n)
			continue
		}
		r, rs, err := e.joinerPhase(ctx, n, logf)
		if r != nil {
			res.Joiners = append(res.Joiners, *r)
		}
		if rs != nil {
			res.Restores = append(res.Restores, *rs)
		}
		failed(fmt.Sprintf("%d joiner(s)", n), err)
	}
	if len(res.Joiners) > 0 {
		// Bytes per finding of the first phase whose findings are right.
		db := res.Joiners[0].Database
		for _, j := range res.Joiners {
			if j.Truth == "equal" {
				db = j.Database
				break
			}
		}
		st, err := e.storage(ctx, db, "drift_evidence")
		if err != nil {
			errs = append(errs, err)
		}
		res.Storage = st
	}
	if o.naive && ctx.Err() == nil {
		r, err := e.naivePhase(ctx, logf)
		if r != nil {
			res.Naive = r
			if ns, err := e.storage(ctx, r.Database, "naive_findings"); err == nil {
				res.NaiveStorage = ns
			}
		}
		failed("naive", err)
	}
	if o.rater && ctx.Err() == nil {
		r, err := e.raterPhase(ctx, logf)
		if r != nil {
			res.Rater = r
		}
		failed("rater", err)
	}
	if o.billing && o.rater && ctx.Err() == nil {
		r, err := e.billingPhase(ctx, logf)
		if r != nil {
			res.Billing = r
		}
		failed("billing", err)
	}
	if latency && ctx.Err() == nil {
		lr, err := e.latencyPhase(ctx, logf)
		if lr != nil {
			rep.Latency = lr
		}
		failed("latency", err)
	}
	res.JoinerCounts = e.joinerCounts
	return res, errors.Join(errs...)
}

// fleetConfig is the fleet of one -sizes entry: size events, or size
// identities with -sizes.identities, in o's rounds, with o's usage and
// ledger.
func fleetConfig(o options, size int) (cfg fleet.Config, unit string) {
	events, unit := size, "events"
	if o.sizeIdentities {
		// SizedConfig counts 7.5 events per identity of the default fleet.
		events, unit = size*15/2, "identities"
	}
	cfg = fleet.SizedConfig(events)
	cfg.Rounds, cfg.UsagePerResource = o.fleetRounds, o.fleetUsage
	if o.ledger {
		cfg.Ledger = fleet.DefaultLedger()
		cfg.Ledger.Enabled = true
	}
	return cfg, unit
}

// migrate creates database db with the read model's migrations.
func (e *env) migrate(ctx context.Context, db string) error {
	cfg := e.st.ClickHouse()
	cfg.Database = db
	conn, err := readmodel.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := readmodel.Migrate(ctx, conn, db); err != nil {
		return fmt.Errorf("migrate %s: %w", db, err)
	}
	return nil
}

// freeAddr returns a free loopback host:port.
func freeAddr() string {
	a, err := freeport.Addr("127.0.0.1")
	if err != nil {
		return "127.0.0.1:0"
	}
	return a
}

// childEnv is the environment of every pipeline process: the stack's
// settings over the harness's own.
func (e *env) childEnv() []string { return append(os.Environ(), e.st.Env()...) }

// consumerPhase runs procs until group has committed everything in
// topicNames (or timeout), and measures it.
func (e *env) consumerPhase(ctx context.Context, label, group, db string, topicNames []string, procs []*child, timeout time.Duration, logf func(string, ...any)) (*consumerResult, error) {
	start := procs[0].started
	mark := markCPU(e.infra)
	load := loadavg()
	var memChecked time.Time
	alive := func() error {
		for _, c := range procs {
			if c.exited() {
				return fmt.Errorf("%s exited: %v; log tail:\n%s", c.name, c.err, c.tail(2000))
			}
		}
		if e.o.memFloor > 0 && time.Since(memChecked) >= time.Second {
			memChecked = time.Now()
			if avail, err := statusFieldFile("/proc/meminfo", "MemAvailable:"); err == nil && avail < e.o.memFloor {
				var rss int64
				for _, c := range procs {
					if n, err := statusField(c.pid(), "VmRSS:"); err == nil {
						rss += n
					}
				}
				return fmt.Errorf("stopped: the machine's available memory fell to %s, below -mem.floor %s, with the %d process(es) at %s resident together; "+
					"Possible solutions: a smaller -sizes, or a machine with more memory", gib(avail), gib(e.o.memFloor), len(procs), gib(rss))
			}
		}
		return nil
	}
	p, done, samples, err := watch(ctx, e.adm, group, topicNames, start, timeout, alive, logf)
	end := done
	r := &consumerResult{Label: label, Processes: len(procs), Group: group, Database: db, Records: p.Committed, End: p.End, CaughtUp: !done.IsZero(), Samples: samples, Load: load}
	if end.IsZero() {
		end = time.Now()
	}
	r.Seconds = end.Sub(start).Seconds()
	r.RecordsPerSec = float64(p.Committed) / r.Seconds
	for _, s := range samples {
		if s.Committed > 0 {
			r.FirstCommit = s.T
			break
		}
	}
	for _, c := range procs {
		if !c.exited() {
			r.Usage = append(r.Usage, c.usage())
		}
	}
	r.Usage = append(r.Usage, mark.since()...)
	for _, u := range r.Usage {
		r.CPUSeconds += u.CPUSeconds
	}
	if p.Committed > 0 {
		r.CPUPerMillion = r.CPUSeconds / (float64(p.Committed) / 1e6)
	}
	if r.CaughtUp {
		logf("%s: %d records in %.1fs = %.0f records/s, %.1f CPU s per million", label, p.Committed, r.Seconds, r.RecordsPerSec, r.CPUPerMillion)
	} else {
		logf("%s: not caught up after %.1fs: %s = %.0f records/s so far", label, r.Seconds, describeLag(p), r.RecordsPerSec)
	}
	return r, err
}

// startJoiners starts members 1 to n of group; member i logs to
// log/<group>-<i><suffix>.log. If one fails to start, those started are
// stopped.
func (e *env) startJoiners(n int, group, db, suffix string) ([]*child, error) {
	var procs []*child
	for i := 1; i <= n; i++ {
		addr := freeAddr()
		args := []string{"-joiner.addr", addr, "-joiner.group", group, "-clickhouse.db", db}
		if e.o.profile {
			args = append(args, "-cpuprofile", filepath.Join(e.dir, "log", fmt.Sprintf("%s-%d%s.cpu.pprof", group, i, suffix)))
		}
		c, err := startChild(fmt.Sprintf("%s-%d%s", group, i, suffix), filepath.Join(e.o.binDir, "joiner"), args, e.childEnv(), filepath.Join(e.dir, "log"), addr)
		if err != nil {
			stopAll(procs)
			return nil, err
		}
		procs = append(procs, c)
	}
	return procs, nil
}

func stopAll(procs []*child) {
	for _, c := range procs {
		_ = c.cmd.Process.Signal(os.Interrupt)
	}
	for _, c := range procs {
		c.stop(30 * time.Second)
	}
}

// joinerPhase runs n joiners in a fresh group and database until they have
// committed every joined record, checks the findings against the ground
// truth, then restarts all n and measures the restore.
func (e *env) joinerPhase(ctx context.Context, n int, logf func(string, ...any)) (*consumerResult, *restoreResult, error) {
	group := "bench-joiner-x" + strconv.Itoa(n)
	db := "bench_joiner_x" + strconv.Itoa(n)
	if err := e.migrate(ctx, db); err != nil {
		return nil, nil, err
	}
	logf("%d joiner(s), group %s, database %s", n, group, db)
	quiesce(logf)
	procs, err := e.startJoiners(n, group, db, "")
	if err != nil {
		return nil, nil, err
	}
	settled := e.watchSettled(ctx, procs)
	r, err := e.consumerPhase(ctx, fmt.Sprintf("joiner x%d", n), group, db, e.names.Joined(), procs, e.o.phaseTimeout, logf)
	steady := settled.window(ctx, r, procs)
	if r != nil && r.CaughtUp {
		r.Steady = steady
		if w := r.Steady; w != nil {
			logf("joiner x%d settled %.1fs after start: %d events in %.1fs, %.2f joiner CPU s per million events (%.2f with broker and ClickHouse)",
				n, w.Start, w.Events, w.Seconds, w.CPUPerMillion, w.AllCPUPerMillion)
		} else {
			logf("joiner x%d: caught up before every member owned partitions; no settled window", n)
		}
	}
	stopAll(procs)
	if err != nil || !r.CaughtUp {
		return r, nil, err
	}
	r.Findings, r.Truth = e.checkFindings(ctx, db)
	logf("joiner x%d: %d findings; ground truth: %s", n, r.Findings, r.Truth)

	// Restore: every member restarts at once, as after a deploy.
	rs := &restoreResult{Processes: n, Partitions: e.o.partitions}
	procs, err = e.startJoiners(n, group, db, "-restart")
	if err != nil {
		return r, nil, err
	}
	defer stopAll(procs)
	start := procs[0].started
	deadline := start.Add(e.o.phaseTimeout)
	for {
		var assigned, restoreSum, restoreEvents, restores, fromCheckpoint float64
		ok := true
		members := 0
		for _, c := range procs {
			if c.exited() {
				return r, nil, fmt.Errorf("%s exited during restore: %v; log tail:\n%s", c.name, c.err, c.tail(2000))
			}
			m, err := c.scrape(ctx, "driftline_joiner_partitions_assigned", "driftline_joiner_restore_seconds_sum",
				"driftline_joiner_restore_seconds_count", "driftline_joiner_restore_events_total", "driftline_joiner_restore_checkpoints_total")
			if err != nil {
				ok = false
				break
			}
			assigned += m["driftline_joiner_partitions_assigned"]
			if m["driftline_joiner_partitions_assigned"] > 0 {
				members++
			}
			restoreSum = max(restoreSum, m["driftline_joiner_restore_seconds_sum"])
			restoreEvents += m["driftline_joiner_restore_events_total"]
			restores += m["driftline_joiner_restore_seconds_count"]
			fromCheckpoint += m["driftline_joiner_restore_checkpoints_total"]
		}
		// Serving again: every partition restored and owned, and spread
		// over every member (a member that joins late takes partitions
		// from one that already restored them).
		if ok && int(assigned) == e.o.partitions && members == min(n, e.o.partitions) {
			rs.Seconds = time.Since(start).Seconds()
			rs.RestoreSeconds = restoreSum
			rs.RestoredEvents = int64(restoreEvents)
			rs.Restores = int(restores)
			rs.FromCheckpoint = int(fromCheckpoint)
			for _, c := range procs {
				u := c.usage()
				rs.PeakRSS = max(rs.PeakRSS, u.PeakRSS)
			}
			logf("joiner x%d restart: serving all %d partitions %.2fs after start (restore %.2fs, %d events replayed, %d restore(s), %d partition(s) from a checkpoint)",
				n, e.o.partitions, rs.Seconds, rs.RestoreSeconds, rs.RestoredEvents, rs.Restores, rs.FromCheckpoint)
			return r, rs, nil
		}
		if time.Now().After(deadline) {
			return r, nil, fmt.Errorf("restore of %d joiner(s) not done after %v (%v of %d partitions assigned)", n, e.o.phaseTimeout, assigned, e.o.partitions)
		}
		select {
		case <-ctx.Done():
			return r, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkFindings compares the current findings in db with the ground truth.
func (e *env) checkFindings(ctx context.Context, db string) (int, string) {
	got, err := fleet.ReadFindings(ctx, e.conn, db)
	if err != nil {
		return len(got), "not checked: " + err.Error()
	}
	if e.joinerCounts == nil {
		e.joinerCounts = map[string]int{}
		for _, f := range got {
			e.joinerCounts[f.Classification]++
		}
	}
	d := e.truth.Compare(got, fleet.CompareOptions{})
	if d.Empty() {
		return len(got), "equal"
	}
	byClass := map[string]int{}
	for _, f := range d.Unexpected {
		byClass[f.Classification+" "+f.Status]++
	}
	path := filepath.Join(e.dir, "diff-"+db+".txt")
	_ = os.WriteFile(path, []byte(d.String()), 0o644)
	return len(got), fmt.Sprintf("differs: %d missing, %d unexpected (%v), %d mismatched; the diff is in %s", len(d.Missing), len(d.Unexpected), byClass, len(d.Mismatched), filepath.Base(path))
}

// storage reads the database's size on disk from system.parts.
func (e *env) storage(ctx context.Context, db, findingsTable string) (*storageResult, error) {
	s := &storageResult{Database: db}
	// Merge first, so the figure is what the data settles to, not the
	// unmerged parts of the last inserts.
	rows, err := e.conn.Query(ctx, `SELECT table, sum(bytes_on_disk), sum(rows), count() FROM system.parts
		WHERE database = ? AND active GROUP BY table ORDER BY table`, db)
	if err != nil {
		return nil, fmt.Errorf("system.parts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.Table, &t.Bytes, &t.Rows, &t.Parts); err != nil {
			return nil, err
		}
		s.Tables = append(s.Tables, t)
		s.Bytes += t.Bytes
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var findings uint64
	if err := e.conn.QueryRow(ctx, `SELECT count() FROM `+db+`.`+findingsTable+` FINAL`).Scan(&findings); err != nil {
		return nil, err
	}
	s.Findings = int64(findings)
	if findings > 0 {
		s.BytesPerFinding = float64(s.Bytes) / float64(findings)
	}
	return s, nil
}

// naivePhase runs bench/naive on the joined topics, bounded by -naive.timeout.
func (e *env) naivePhase(ctx context.Context, logf func(string, ...any)) (*consumerResult, error) {
	group, db := "bench-naive", "bench_naive"
	logf("%s, group %s, database %s (at most %v)", baselineName(e.o.naiveBatch), group, db, e.o.naiveTimeout)
	quiesce(logf)
	c, err := startChild("naive", filepath.Join(e.o.binDir, "naive"),
		[]string{"-brokers", e.st.BrokerAddr(), "-group", group, "-clickhouse.addr", e.st.ClickHouseAddr(), "-db", db,
			"-insert.batch", strconv.Itoa(e.o.naiveBatch)},
		e.childEnv(), filepath.Join(e.dir, "log"), "")
	if err != nil {
		return nil, err
	}
	r, err := e.consumerPhase(ctx, "naive", group, db, e.names.Joined(), []*child{c}, e.o.naiveTimeout, logf)
	c.stop(30 * time.Second)
	if r != nil {
		r.NaiveCounts = e.naiveCounts(ctx, db)
	}
	return r, err
}

func (e *env) naiveCounts(ctx context.Context, db string) map[string]int {
	out := map[string]int{}
	rows, err := e.conn.Query(ctx, `SELECT classification, status, count() FROM `+db+`.naive_findings FINAL GROUP BY classification, status`)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var c, s string
		var n uint64
		if rows.Scan(&c, &s, &n) == nil {
			out[c+" "+s] = int(n)
		}
	}
	return out
}

// raterPhase runs bin/rater, rating only, until its group has committed
// all of usage.events.
func (e *env) raterPhase(ctx context.Context, logf func(string, ...any)) (*consumerResult, error) {
	group := "driftline-rater"
	logf("rater, group %s", group)
	return e.billingProcess(ctx, "rater", group, []string{"-rater.group", group, "-billing.enabled=false"}, []string{e.names.Usage}, logf)
}

// billingPhase runs the billing reconciler alone (bin/rater
// -rater.enabled=false) until its group has committed all of the billing
// topics, then checks rated_usage against the ground truth's totals.
func (e *env) billingPhase(ctx context.Context, logf func(string, ...any)) (*consumerResult, error) {
	group := "driftline-billing"
	logf("billing reconciler, group %s, database %s", group, service.DefaultDatabase)
	r, err := e.billingProcess(ctx, "billing", group, []string{"-billing.group", group, "-rater.enabled=false"},
		[]string{e.names.Usage, e.names.Rated, e.names.Ledger}, logf)
	if err != nil || r == nil || !r.CaughtUp {
		return r, err
	}
	r.Truth = e.checkRatedTotals(ctx)
	logf("billing: rated_usage against the ground truth's totals: %s", r.Truth)
	return r, nil
}

// billingProcess runs bin/rater with args until group has committed all of
// topicNames, and measures it.
func (e *env) billingProcess(ctx context.Context, name, group string, args, topicNames []string, logf func(string, ...any)) (*consumerResult, error) {
	addr := freeAddr()
	book, _ := filepath.Abs(filepath.Join("deploy", "pricebook.json"))
	env := append(e.childEnv(), "DRIFTLINE_RATER_ADDR="+addr, "DRIFTLINE_RATER_PRICEBOOK="+book)
	if e.o.profile {
		args = append(args, "-cpuprofile", filepath.Join(e.dir, "log", name+".cpu.pprof"))
	}
	quiesce(logf)
	c, err := startChild(name, filepath.Join(e.o.binDir, "rater"), args, env, filepath.Join(e.dir, "log"), addr)
	if err != nil {
		return nil, err
	}
	r, err := e.consumerPhase(ctx, name, group, service.DefaultDatabase, topicNames, []*child{c}, e.o.phaseTimeout, logf)
	c.stop(30 * time.Second)
	return r, err
}

// checkRatedTotals compares the quantity rated per tenant and unit in
// rated_usage with the ground truth's totals, exactly.
func (e *env) checkRatedTotals(ctx context.Context) string {
	want := map[string]string{}
	lines := 0
	for _, t := range e.truth.Usage.Totals {
		want[t.TenantID+"/"+t.UnitID] = t.Quantity
		lines += t.Events
	}
	rows, err := e.conn.Query(ctx, "SELECT tenant_id, unit_id, quantity FROM "+service.DefaultDatabase+".rated_usage FINAL")
	if err != nil {
		return "not checked: " + err.Error()
	}
	defer rows.Close()
	sums := map[string]decimal.Dec{}
	got := 0
	for rows.Next() {
		var tenant, unit, qty string
		if err := rows.Scan(&tenant, &unit, &qty); err != nil {
			return "not checked: " + err.Error()
		}
		q, err := decimal.Parse(qty)
		if err != nil {
			return fmt.Sprintf("differs: rated_usage quantity %q: %v", qty, err)
		}
		k := tenant + "/" + unit
		if sums[k], err = decimal.Add(sums[k], q); err != nil {
			return "not checked: " + err.Error()
		}
		got++
	}
	if err := rows.Err(); err != nil {
		return "not checked: " + err.Error()
	}
	var diffs []string
	for k, w := range want {
		wq, err := decimal.Parse(w)
		if err != nil {
			return "not checked: " + err.Error()
		}
		if g, ok := sums[k]; !ok || !decimal.Equal(g, wq) {
			diffs = append(diffs, fmt.Sprintf("%s %s, want %s", k, sums[k].String(), w))
		}
	}
	for k := range sums {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "unexpected "+k)
		}
	}
	if got != lines {
		diffs = append(diffs, fmt.Sprintf("%d rated lines, want %d", got, lines))
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
		}
		return "differs: " + strings.Join(diffs, "; ")
	}
	return fmt.Sprintf("equal (%d rated lines, %d tenant/unit totals)", got, len(sums))
}

// settledMark is the state of a joiner group when it settled: every member
// owns partitions (min(members, partitions) of them own some, and the
// partitions add up), so the rebalances of the start, with the restores
// of moved partitions, are over.
type settledMark struct {
	cancel context.CancelFunc
	done   chan struct{}
	ok     bool
	at     time.Time
	events float64
	cpu    map[string]float64 // per joiner process
	infra  cpuMark
}

// settledPoll is how often watchSettled reads the members' metrics; each
// read is one /metrics request per member.
const settledPoll = 200 * time.Millisecond

// watchSettled reads the members' metrics until the group has settled, and
// marks the CPU time and the events applied then.
func (e *env) watchSettled(ctx context.Context, procs []*child) *settledMark {
	m := &settledMark{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(settledPoll):
			}
			var assigned, events float64
			owners := 0
			ok := true
			for _, c := range procs {
				v, err := c.scrape(ctx, "driftline_joiner_partitions_assigned", "driftline_joiner_events_total")
				if err != nil {
					ok = false
					break
				}
				assigned += v["driftline_joiner_partitions_assigned"]
				events += v["driftline_joiner_events_total"]
				if v["driftline_joiner_partitions_assigned"] > 0 {
					owners++
				}
			}
			if !ok || int(assigned) != e.o.partitions || owners != min(len(procs), e.o.partitions) {
				continue
			}
			m.ok, m.at, m.events, m.cpu, m.infra = true, time.Now(), events, map[string]float64{}, markCPU(e.infra)
			for _, c := range procs {
				m.cpu[c.name] = c.usage().CPUSeconds
			}
			return
		}
	}()
	m.cancel = cancel
	return m
}

// window stops watching and returns the phase's settled window, nil if the
// group caught up before it settled, or did not catch up. Call it as soon as the phase has
// caught up: the joiners' CPU time is r's (read then), the events and the
// broker's and ClickHouse's CPU time are read now.
func (m *settledMark) window(ctx context.Context, r *consumerResult, procs []*child) *steadyWindow {
	m.cancel()
	<-m.done
	if !m.ok || r == nil || !r.CaughtUp {
		return nil
	}
	var events float64
	for _, c := range procs {
		v, err := c.scrape(ctx, "driftline_joiner_events_total")
		if err != nil {
			return nil
		}
		events += v["driftline_joiner_events_total"]
	}
	w := &steadyWindow{
		Start:   m.at.Sub(procs[0].started).Seconds(),
		Records: r.Records,
		Events:  int64(events - m.events),
	}
	w.Seconds = r.Seconds - w.Start
	for _, u := range r.Usage {
		if c, ok := m.cpu[u.Name]; ok {
			w.CPUSeconds += u.CPUSeconds - c
		}
	}
	var infra float64
	for _, u := range m.infra.since() {
		infra += u.CPUSeconds
	}
	if w.Events > 0 {
		w.CPUPerMillion = w.CPUSeconds / (float64(w.Events) / 1e6)
		w.AllCPUPerMillion = (w.CPUSeconds + infra) / (float64(w.Events) / 1e6)
	}
	return w
}
