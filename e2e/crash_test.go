package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
)

// EnvCrashSeeds replays chosen crash schedules: a comma-separated list of
// seeds (e.g. DRIFTLINE_CRASH_SEEDS=7 go test ./e2e -run CrashSafety -v).
const EnvCrashSeeds = "DRIFTLINE_CRASH_SEEDS"

// crashPartitions is the partition count of every topic.
const crashPartitions = 6

// defaultCrashSeeds are the schedules make test runs.
var defaultCrashSeeds = []int64{1, 2, 3}

// TestJoinerCrashSafety is the crash-safety proof of the joiner: real
// joiner processes in one consumer group, against the real broker and
// ClickHouse, are killed with SIGKILL and restarted, joined by more
// members and stopped with SIGTERM at seeded-random moments while a fleet
// is fed. Once the group has caught up, the finding tables must be
// identical (wall-clock columns aside) to those an uninterrupted single
// joiner writes from the same topics into another database, and the
// findings must equal the generator's ground truth.
func TestJoinerCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse, the broker and several joiner processes")
	}
	seeds := seedsFromEnv(t, EnvCrashSeeds, defaultCrashSeeds)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := buildCommands(t, ctx, stack.NameBroker, stack.NameIngest, stack.NameJoiner)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay with %s=%d", EnvCrashSeeds, seed)
			runCrashSchedule(t, ctx, bin, seed)
		})
	}
}

// crashAction is one step of a crash schedule.
type crashAction struct {
	after  time.Duration // wait before the step
	kind   string        // kill (SIGKILL, then restart), add, term (SIGTERM)
	target int           // index into the running joiners (kill, term)
}

func (a crashAction) String() string {
	switch a.kind {
	case "kill":
		return fmt.Sprintf("+%v kill -9 running[%d], restart it", a.after, a.target)
	case "term":
		return fmt.Sprintf("+%v SIGTERM running[%d]", a.after, a.target)
	}
	return fmt.Sprintf("+%v start one more joiner", a.after)
}

// crashSchedule derives the initial joiner count and the steps from seed,
// keeping 1..3 joiners running after every step.
func crashSchedule(seed int64, steps int) (initial int, actions []crashAction) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6a6f696e6572))
	initial = 1 + rng.IntN(3)
	running := initial
	for range steps {
		a := crashAction{after: time.Duration(300+rng.IntN(1700)) * time.Millisecond}
		for {
			switch rng.IntN(3) {
			case 0:
				a.kind = "kill"
			case 1:
				if running == 3 {
					continue
				}
				a.kind = "add"
				running++
			case 2:
				if running == 1 {
					continue
				}
				a.kind = "term"
				running--
			}
			break
		}
		if a.kind != "add" {
			a.target = rng.IntN(running + boolInt(a.kind == "term"))
		}
		actions = append(actions, a)
	}
	return initial, actions
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func runCrashSchedule(t *testing.T, ctx context.Context, bin string, seed int64) {
	start := time.Now()
	s := startStack(t, ctx, stack.Options{
		Dir:        t.TempDir(),
		BinDir:     bin,
		Partitions: crashPartitions,
		Services:   []string{stack.NameIngest},
	})
	t.Logf("stack up in %v", time.Since(start).Round(time.Millisecond))

	cfg := fleet.DefaultConfig()
	cfg.Seed = seed
	cfg.Domains = 12
	gen, truth := newGenerator(t, cfg)

	group := "crash-joiner"
	js := &joinerSet{t: t, bin: filepath.Join(bin, "joiner"), env: append(os.Environ(), s.Env()...),
		dir: t.TempDir(), group: group, db: s.ClickHouse().Database}
	t.Cleanup(js.stopAll)
	t.Cleanup(func() {
		if t.Failed() {
			js.dumpLogs()
		}
	})

	initial, actions := crashSchedule(seed, 10)
	var plan strings.Builder
	fmt.Fprintf(&plan, "crash schedule (seed %d): start %d joiner(s)", seed, initial)
	for _, a := range actions {
		fmt.Fprintf(&plan, "\n  %v", a)
	}
	t.Log(plan.String())
	for range initial {
		js.start()
	}

	// Feed in paced batches, so the steps land while the joiners are in
	// the middle of the stream.
	feedDone := feedPaced(ctx, s, gen, 400, 120*time.Millisecond)
	for i, a := range actions {
		time.Sleep(a.after)
		js.step(i, a)
	}
	stats, err := feedDone()
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	if stats.Rejected != 0 || stats.Accepted+stats.Duplicate != stats.Events {
		t.Fatalf("feed stats %+v", stats)
	}
	t.Logf("fed %d events in %v; schedule done", stats.Events, time.Since(start).Round(time.Millisecond))

	waitGroupCaughtUp(t, s.BrokerAddr(), group, time.Minute)
	js.checkAlive()
	js.stopAll()
	t.Logf("crash run caught up at %v", time.Since(start).Round(time.Millisecond))

	checkJoinerTables(t, ctx, s, js, truth, start)
	t.Logf("seed %d done in %v", seed, time.Since(start).Round(time.Millisecond))
}
