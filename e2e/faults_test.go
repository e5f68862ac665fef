package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/joiner"
)

// Environment of the fault tests.
const (
	// EnvFaultSeed replays chosen fault schedules: a comma-separated list
	// of seeds, e.g. DRIFTLINE_FAULT_SEED=7 go test ./e2e -run 'TestFaults$' -v.
	EnvFaultSeed = "DRIFTLINE_FAULT_SEED"
	// EnvSoak is how long TestFaultSoak runs schedules back to back (a Go
	// duration, e.g. 20m); unset, it is skipped. make soak sets it.
	EnvSoak = "DRIFTLINE_SOAK"
	// EnvFaultKeep names a directory where each run keeps its stack
	// directory and joiner logs (whole, not only their tails), for a
	// failure to be read at leisure.
	EnvFaultKeep = "DRIFTLINE_FAULT_KEEP"
)

// defaultFaultSeeds are the schedules make test runs.
var defaultFaultSeeds = []int64{1}

// faultKind is one kind of fault a schedule injects.
type faultKind string

const (
	faultKillJoiner     faultKind = "kill-joiner"     // SIGKILL one joiner, start a new one at once
	faultAddJoiner      faultKind = "add-joiner"      // one more joiner: a rebalance
	faultStopJoiner     faultKind = "stop-joiner"     // SIGTERM one joiner: a rebalance
	faultKillRater      faultKind = "kill-rater"      // SIGKILL the rater (and its billing reconciler), start it after a while
	faultKillIngest     faultKind = "kill-ingest"     // SIGKILL the ingest gateway mid-request, start it after a while
	faultRestartBroker  faultKind = "restart-broker"  // SIGTERM the broker, start it on its data after a while
	faultKillBroker     faultKind = "kill-broker"     // SIGKILL the broker, start it on its data after a while
	faultStopClickHouse faultKind = "stop-clickhouse" // SIGTERM ClickHouse mid-flush, start it on its data after a while
	faultKillClickHouse faultKind = "kill-clickhouse" // SIGKILL ClickHouse mid-flush, start it on its data after a while
	faultKillQuery      faultKind = "kill-query"      // SIGKILL the query service while operators act, start it after a while
)

// allFaults lists every kind: each schedule injects each at least once.
var allFaults = []faultKind{faultKillJoiner, faultAddJoiner, faultStopJoiner, faultKillRater, faultKillIngest,
	faultRestartBroker, faultKillBroker, faultStopClickHouse, faultKillClickHouse, faultKillQuery}

// skippedFaults maps a fault kind to the reason it is not injected (a
// known bug, named): schedules keep their shape, the step is logged as
// skipped. Empty when every fault is covered.
var skippedFaults = map[faultKind]string{}

// fault is one step of a schedule.
type fault struct {
	after  time.Duration // wait before the step
	kind   faultKind
	target int           // joiner steps: index into the running joiners
	down   time.Duration // component steps: how long it stays down
}

func (f fault) String() string {
	switch f.kind {
	case faultAddJoiner:
		return fmt.Sprintf("+%v %s", f.after, f.kind)
	case faultKillJoiner, faultStopJoiner:
		return fmt.Sprintf("+%v %s running[%d]", f.after, f.kind, f.target)
	}
	return fmt.Sprintf("+%v %s, down %v", f.after, f.kind, f.down)
}

// faultParams sizes a run.
type faultParams struct {
	domains int           // fleet size (about 3,300 events per domain)
	steps   int           // faults per schedule, at least len(allFaults)
	maxGap  time.Duration // longest wait between steps
	maxDown time.Duration // longest time a component stays down
}

var (
	quickFaults = faultParams{domains: 8, steps: 12, maxGap: 1500 * time.Millisecond, maxDown: 3 * time.Second}
	soakFaults  = faultParams{domains: 24, steps: 40, maxGap: 3 * time.Second, maxDown: 8 * time.Second}
)

// faultLiveHold is the joiners' -joiner.liveHold: longer than a record
// produced through the gateway can take to reach the broker (the gateway
// fails records it could not send within its produce timeout; the broker
// is down for at most maxDown plus its restart, and the producer retries
// with a backoff below a second), with a margin for the joiner's fetch
// after the broker restarts. A record a producer timestamped before a
// broker restart and delivered after it is then applied in timestamp
// order, as the reference run applies it, not late.
const faultLiveHold = ingest.DefaultProduceTimeout + 5*time.Second

// faultPlan is a seeded schedule.
type faultPlan struct {
	seed    int64
	joiners int // joiners running at the start
	faults  []fault
}

// duration is the planned length of the schedule, restarts aside.
func (p faultPlan) duration() time.Duration {
	var d time.Duration
	for _, f := range p.faults {
		d += f.after + f.down
	}
	return d
}

func (p faultPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault schedule (seed %d, about %v): start %d joiner(s)", p.seed, p.duration().Round(time.Second), p.joiners)
	for i, f := range p.faults {
		fmt.Fprintf(&b, "\n  %2d %v", i, f)
		if why, ok := skippedFaults[f.kind]; ok {
			fmt.Fprintf(&b, " (skipped: %s)", why)
		}
	}
	return b.String()
}

// faultSchedule derives a schedule from seed: every kind of fault once,
// the remaining steps drawn at random, in a seeded order, with 1 to 3
// joiners running after every step.
func faultSchedule(seed int64, p faultParams) faultPlan {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6661756c7473))
	kinds := slices.Clone(allFaults)
	for len(kinds) < p.steps {
		kinds = append(kinds, allFaults[rng.IntN(len(allFaults))])
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	plan := faultPlan{seed: seed, joiners: 1 + rng.IntN(3)}
	running := plan.joiners
	for _, k := range kinds {
		f := fault{after: 200*time.Millisecond + time.Duration(rng.Int64N(int64(p.maxGap))), kind: k}
		switch {
		case k == faultAddJoiner && running == 3:
			f.kind = faultStopJoiner
		case k == faultStopJoiner && running == 1:
			f.kind = faultAddJoiner
		}
		switch f.kind {
		case faultAddJoiner:
			running++
		case faultStopJoiner:
			f.target = rng.IntN(running)
			running--
		case faultKillJoiner:
			f.target = rng.IntN(running)
		default:
			f.down = 500*time.Millisecond + time.Duration(rng.Int64N(int64(p.maxDown)))
		}
		plan.faults = append(plan.faults, f)
	}
	return plan
}

// TestFaults is the fault proof of the pipeline: the whole stack (broker,
// ClickHouse, ingest, rater with its billing reconciler, 1..3 joiners) runs
// as processes while a fleet is fed over HTTP, and a seeded schedule kills
// and restarts every component at random moments: joiners (SIGKILL, and
// members added and removed: rebalances), the rater, the ingest gateway,
// the broker (SIGTERM and SIGKILL) and ClickHouse mid-flush (SIGTERM and
// SIGKILL), while a producer whose clock is wrong by minutes to decades
// writes through the gateway and straight to Kafka. Afterwards the
// generator's ground truth, the topics and the tables must agree exactly:
// every event in its topic, each rated line exactly once, findings
// identical to an uninterrupted run and to the truth, billing mismatches
// and rated totals equal to the truth, and each skewed event quarantined
// with its reason and counted once for its producer.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack and kills its components")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin := buildCommands(t, ctx, stack.NameBroker, stack.NameIngest, stack.NameJoiner, stack.NameRater, stack.NameQuery)
	for _, seed := range seedsFromEnv(t, EnvFaultSeed, defaultFaultSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runFaults(t, ctx, bin, seed, quickFaults,
				fmt.Sprintf("%s=%d go test ./e2e -run 'TestFaults$' -v", EnvFaultSeed, seed))
		})
	}
}

// TestFaultSoak runs longer schedules on a larger fleet back to back for
// DRIFTLINE_SOAK (make soak), seeds counting up from DRIFTLINE_FAULT_SEED
// (default: from the clock, printed). With DRIFTLINE_FAULT_SEED set to a
// list, it runs exactly those seeds once each.
func TestFaultSoak(t *testing.T) {
	v := os.Getenv(EnvSoak)
	if v == "" {
		t.Skipf("set %s to a duration (make soak) to run the soak", EnvSoak)
	}
	soak, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", EnvSoak, v, err)
	}
	var seeds []int64
	next := time.Now().UnixNano() % 1_000_000
	if os.Getenv(EnvFaultSeed) != "" {
		seeds = seedsFromEnv(t, EnvFaultSeed, nil)
		next = seeds[0]
	}
	ctx := context.Background()
	bin := buildCommands(t, ctx, stack.NameBroker, stack.NameIngest, stack.NameJoiner, stack.NameRater, stack.NameQuery)
	start := time.Now()
	var ran []int64
	for i := 0; ; i++ {
		var seed int64
		if len(seeds) > 1 {
			if i == len(seeds) {
				break
			}
			seed = seeds[i]
		} else {
			if i > 0 && time.Since(start) >= soak {
				break
			}
			seed = next + int64(i)
		}
		ran = append(ran, seed)
		rctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runFaults(t, rctx, bin, seed, soakFaults,
				fmt.Sprintf("%s=1s %s=%d go test ./e2e -run TestFaultSoak -v -timeout 30m", EnvSoak, EnvFaultSeed, seed))
		})
		cancel()
		if !ok {
			break
		}
	}
	t.Logf("soak: %d schedule(s) in %v, seeds %v", len(ran), time.Since(start).Round(time.Second), ran)
}

// runFaults runs one seeded schedule against a fresh stack and checks
// the outcome; replay is the command that runs it again.
func runFaults(t *testing.T, ctx context.Context, bin string, seed int64, params faultParams, replay string) {
	start := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED fault schedule seed %d; replay with:\n  %s", seed, replay)
		}
	})
	plan := faultSchedule(seed, params)
	t.Log(plan.String())
	t.Logf("replay with: %s", replay)

	dir := t.TempDir()
	if keep := os.Getenv(EnvFaultKeep); keep != "" {
		var err error
		if dir, err = os.MkdirTemp(keep, fmt.Sprintf("seed-%d-", seed)); err != nil {
			t.Fatal(err)
		}
		t.Logf("keeping the stack and the logs in %s", dir)
	}
	s := startStack(t, ctx, stack.Options{
		Dir:        filepath.Join(dir, "stack"),
		BinDir:     bin,
		Partitions: crashPartitions,
		Services:   []string{stack.NameIngest, stack.NameRater, stack.NameQuery},
		Env:        []string{pricebookEnv(t)},
	})
	// The stack restarts nothing: a service that exits on its own during
	// the schedule is a failure, reported with its log.
	var exitMu sync.Mutex
	var exits []*stack.ExitError
	watchDone := make(chan struct{})
	go func() {
		for {
			select {
			case e := <-s.Exited():
				exitMu.Lock()
				exits = append(exits, e)
				exitMu.Unlock()
			case <-watchDone:
				return
			}
		}
	}()
	defer close(watchDone)
	checkExits := func() {
		exitMu.Lock()
		defer exitMu.Unlock()
		for _, e := range exits {
			b, _ := os.ReadFile(e.Log)
			t.Errorf("%v; log:\n%s", e, tail(string(b), 3000))
		}
		exits = nil
	}

	cfg := fleet.DefaultConfig()
	cfg.Seed = seed
	cfg.Domains = params.domains
	cfg.Ledger.Enabled = true
	cfg.ConflictingUsageRate = 0.01 // usage corrected under its usage_id: conflicting_usage
	gen, truth := newGenerator(t, cfg)
	want := expectedTopics(t, gen)

	js := &joinerSet{t: t, bin: filepath.Join(bin, stack.NameJoiner), env: append(os.Environ(), s.Env()...),
		dir: dir, group: "fault-joiner", db: s.ClickHouse().Database, liveHold: faultLiveHold}
	t.Cleanup(js.stopAll)
	t.Cleanup(func() {
		if t.Failed() {
			js.dumpLogs()
		}
	})
	for range plan.joiners {
		js.start()
	}

	// A producer with a broken clock writes through the gateway and
	// straight to Kafka while the faults land (checkSkew).
	skew := skewSchedule(seed, 8, cfg.Start, plan.duration())
	ss := newSkewSender(t, s)
	skewDone := ss.sendFuture(ctx, skew)

	// Pace the feed so that it spans the schedule: every fault lands
	// while events flow.
	const batch = 300
	pace := plan.duration() / time.Duration(want.events/batch+1)
	feedDone := feedPaced(ctx, s, gen, batch, pace)
	// Beside the fleet, a producer that reuses its seqs, over HTTP and
	// straight to Kafka, through the same faults.
	const conflictRounds = 40
	conflicts := newConflictProducer(t, seed, s.IngestURL(), s.BrokerAddr())
	conflictsDone := make(chan error, 1)
	go func() { conflictsDone <- conflicts.run(ctx, conflictRounds, plan.duration()/conflictRounds) }()
	// An operator acts through the query service all along, until the
	// joiners have caught up after the feed.
	op := startOperator(t, s)
	for i, f := range plan.faults {
		select {
		case <-time.After(f.after):
		case <-ctx.Done():
			t.Fatalf("step %d: %v", i, ctx.Err())
		}
		if why, ok := skippedFaults[f.kind]; ok {
			t.Logf("step %d: %v skipped: %s", i, f, why)
			continue
		}
		injectFault(t, ctx, s, js, i, f)
	}
	t.Logf("schedule done at %v", time.Since(start).Round(time.Millisecond))
	op.scheduleDone()
	stats, err := feedDone()
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	if err := <-conflictsDone; err != nil {
		t.Fatalf("conflicting producer: %v", err)
	}
	conflicts.addTo(&want)
	if stats.Rejected != 0 || stats.Accepted+stats.Duplicate != stats.Events {
		t.Fatalf("feed stats %+v: want nothing rejected and accepted+duplicate = events", stats)
	}
	if err := <-skewDone; err != nil {
		t.Fatalf("skewed producer: %v", err)
	}
	ss.sendPast(ctx, skew)
	t.Logf("fed %d events (%d accepted, %d duplicate, %d retried requests) at %v",
		stats.Events, stats.Accepted, stats.Duplicate, stats.Retries, time.Since(start).Round(time.Millisecond))

	// The operator goes on after the schedule: a fleet's findings show
	// only late in its feed (the generator sends every record before its
	// first scan round), and a schedule may keep ClickHouse down just
	// then, so there may have been nothing to act on yet. So that its
	// actions meet a fault in every run, the query service is killed once
	// more as soon as one is accepted; the operator stops once the
	// joiners have caught up, and its last commands are applied before
	// they stop.
	testenv.CheckFor(t, time.Minute, func() error {
		if op.acceptedCount() == 0 {
			return fmt.Errorf("the operator has no action accepted: %s", op.summary())
		}
		return nil
	})
	before := op.acceptedCount()
	injectFault(t, ctx, s, js, len(plan.faults), fault{kind: faultKillQuery, down: time.Second})
	waitGroupCaughtUp(t, s.BrokerAddr(), js.group, time.Minute)
	accepted := op.finish()
	t.Logf("the operator went on through a last kill of the query service: %d actions accepted before it, %d by the end",
		before, len(accepted))
	waitGroupCaughtUp(t, s.BrokerAddr(), js.group, time.Minute)
	js.checkAlive()
	js.stopAll()
	checkExits()
	t.Logf("joiners caught up at %v; %v records applied late, %v live-tail holds ran out (as the joiners' metrics said when stopped)",
		time.Since(start).Round(time.Millisecond), js.late, js.holdsExpired)

	checkBilling(t, s, truth)
	checkActions(t, ctx, s, op, accepted)
	checkTopics(t, ctx, s.BrokerAddr(), want, truth)
	checkJoinerTables(t, ctx, s, js, truth, start)
	checkSkew(t, ctx, s, js.group, skew)
	conflicts.check(t, ctx, s, js.group, "reference-joiner")
	checkExits()
	t.Logf("seed %d done in %v", seed, time.Since(start).Round(time.Millisecond))
}

// injectFault runs step i of a schedule and returns once the component
// it hit runs again.
func injectFault(t *testing.T, ctx context.Context, s *stack.Stack, js *joinerSet, i int, f fault) {
	t.Helper()
	switch f.kind {
	case faultKillJoiner:
		js.step(i, crashAction{kind: "kill", target: f.target})
		return
	case faultAddJoiner:
		js.step(i, crashAction{kind: "add"})
		return
	case faultStopJoiner:
		js.step(i, crashAction{kind: "term", target: f.target})
		return
	}
	var name string
	kill := true
	switch f.kind {
	case faultKillRater:
		name = stack.NameRater
	case faultKillIngest:
		name = stack.NameIngest
	case faultRestartBroker:
		name, kill = stack.NameBroker, false
	case faultKillBroker:
		name = stack.NameBroker
	case faultStopClickHouse:
		name, kill = stack.NameClickHouse, false
	case faultKillClickHouse:
		name = stack.NameClickHouse
	case faultKillQuery:
		name = stack.NameQuery
	default:
		t.Fatalf("step %d: unknown fault %q", i, f.kind)
	}
	began := time.Now()
	var err error
	if kill {
		err = s.Kill(name)
	} else {
		err = s.StopComponent(ctx, name)
	}
	if err != nil {
		t.Fatalf("step %d: %v: %v", i, f, err)
	}
	stopped := time.Since(began)
	time.Sleep(f.down)
	began = time.Now()
	if err := s.StartComponent(ctx, name); err != nil {
		t.Fatalf("step %d: %v: start %s again: %v", i, f, name, err)
	}
	t.Logf("step %d: %s (stopped in %v, down %v, up again in %v)", i, f.kind,
		stopped.Round(time.Millisecond), f.down, time.Since(began).Round(time.Millisecond))
}

// topicTruth is what the input topics must hold: the event_ids of the
// generated stream by topic, and how many lines it has.
type topicTruth struct {
	events int                        // lines, redeliveries included
	ids    map[string]map[string]bool // topic -> event_id
	// allowed holds the event_ids a topic may hold beside ids (but need
	// not): the conflicting producer's repeats the gateway may have
	// rejected.
	allowed map[string]map[string]bool
}

func expectedTopics(t *testing.T, gen *fleet.Generator) topicTruth {
	t.Helper()
	names := contract.DefaultTopics()
	want := topicTruth{ids: map[string]map[string]bool{}}
	err := gen.Emit(func(ev *fleet.Event) error {
		want.events++
		topic := names.ForType(ev.Type)
		if topic == "" {
			return fmt.Errorf("event type %q has no topic", ev.Type)
		}
		id, err := eventID(ev.Line)
		if err != nil {
			return err
		}
		if want.ids[topic] == nil {
			want.ids[topic] = map[string]bool{}
		}
		want.ids[topic][id] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func eventID(line []byte) (string, error) {
	var env struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(line, &env); err != nil || env.EventID == "" {
		return "", fmt.Errorf("no event_id in %.200s: %v", line, err)
	}
	return env.EventID, nil
}

// checkTopics reads every input topic and billing.rated back. Each
// generated event must be in its topic and nothing else may be there (but
// the joiner's control records and the skewed producer's events, which
// checkSkew checks);
// copies of an event are allowed (ingest is at-least-once across a crash,
// consumers dedupe) and counted. billing.rated, read committed, must hold
// exactly one line per rated usage_id, as many as the truth rates.
func checkTopics(t *testing.T, ctx context.Context, broker string, want topicTruth, truth *fleet.Truth) {
	t.Helper()
	names := contract.DefaultTopics()
	inputs := []string{names.PlatformRecords, names.Observations, names.Telemetry, names.Usage, names.Ledger}
	recs := testenv.ReadTopics(t, ctx, []string{broker}, 2*time.Second, append(inputs, names.Rated)...)
	for _, topic := range inputs {
		got := map[string]int{}
		control := 0
		for _, r := range recs[topic] {
			if isControl(r) {
				control++ // the joiner's own watermark markers
				continue
			}
			id, err := eventID(r.Value)
			if err != nil {
				t.Errorf("%s/%d@%d: %v", topic, r.Partition, r.Offset, err)
				continue
			}
			if !isSkewEvent(id) { // checkSkew's
				got[id]++
			}
		}
		var missing, unexpected []string
		for id := range want.ids[topic] {
			if got[id] == 0 {
				missing = append(missing, id)
			}
		}
		copies := 0
		for id, n := range got {
			if !want.ids[topic][id] && !want.allowed[topic][id] {
				unexpected = append(unexpected, id)
			}
			copies += n - 1
		}
		if len(missing) > 0 || len(unexpected) > 0 {
			slices.Sort(missing)
			slices.Sort(unexpected)
			t.Errorf("%s: %d generated events missing (%v), %d unknown events (%v)", topic,
				len(missing), head(missing, 10), len(unexpected), head(unexpected, 10))
		} else {
			t.Logf("%s: all %d events present (%d records: %d copies beyond the first, %d joiner control records)",
				topic, len(want.ids[topic]), len(recs[topic]), copies, control)
		}
	}

	wantRated := 0
	for _, tt := range truth.Usage.Totals {
		wantRated += tt.Events
	}
	rated := map[string]int{}
	var twice []string
	for _, r := range recs[names.Rated] {
		var l struct {
			Payload struct {
				UsageID string `json:"usage_id"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(r.Value, &l); err != nil || l.Payload.UsageID == "" {
			t.Errorf("rated line %s/%d@%d without usage_id: %.200s", names.Rated, r.Partition, r.Offset, r.Value)
			continue
		}
		if rated[l.Payload.UsageID]++; rated[l.Payload.UsageID] == 2 {
			twice = append(twice, l.Payload.UsageID)
		}
	}
	if len(twice) > 0 || len(rated) != wantRated {
		t.Errorf("%s: %d committed lines for %d usage_ids, %d rated more than once (%v); the truth rates %d",
			names.Rated, len(recs[names.Rated]), len(rated), len(twice), head(twice, 10), wantRated)
	} else {
		t.Logf("%s: %d usage_ids rated exactly once", names.Rated, wantRated)
	}
}

// isControl reports whether r is a record the joiner wrote for itself
// (joiner.HeaderControl), not an event.
func isControl(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == joiner.HeaderControl {
			return true
		}
	}
	return false
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }
