// Command harness measures the whole Driftline pipeline end to end on one
// machine and writes the figures as Markdown (bench/RESULTS.md), JSON and a
// scaling plot (PNG). `make bench` runs it; see bench/README.md for what
// each figure means.
//
// For each data set size it starts a fresh local stack (ClickHouse and
// cmd/broker, through internal/stack), generates a synthetic fleet with
// internal/fleet (known ground truth: findings and usage totals) and
// produces it straight to the broker, then runs the real processes against
// it, one consumer group and one ClickHouse database each, one after the
// other on the same topics:
//
//   - bin/joiner with 1, 2 and 4 processes in one group: records/s from the
//     topics to committed findings (the group's committed offsets reach the
//     end offsets), CPU seconds per million records (the joiners plus the
//     broker's and ClickHouse's share), peak RSS, findings against the
//     ground truth, ClickHouse bytes per finding, and restore time (all
//     members restarted: start until every partition is assigned again);
//   - bin/naive (bench/naive): the same job as a competent engineer writes
//     it in a day (batched inserts; -naive.batch 1 for its row-by-row
//     first version), the baseline every ratio is taken against;
//   - bin/rater over usage.events, rating only;
//   - the billing reconciler (bin/rater -rater.enabled=false) over
//     usage.events, billing.rated and billing.ledger, its rated_usage
//     totals checked against the ground truth.
//
// A latency phase runs once per invocation: one joiner on its own topics,
// fed at a fixed rate (100,000 events/s by default) with events stamped
// with the wall clock; a sample of them opens a finding each, and the
// harness reads the open findings as the query API lists them until each
// is there (occurred_at to queryable, p50/p99), beside the rate the broker
// acknowledged.
//
//	go run ./bench/harness -sizes 1m            # after make build
//	go run ./bench/harness -sizes 1m,10m -results bench/RESULTS.md -plot bench/scaling.png
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/driftline/driftline/internal/stack"
)

type options struct {
	sizes           []int
	sizeIdentities  bool
	fleetRounds     int
	fleetUsage      int
	memFloor        int64
	joiners         []int
	scalingUpTo     int
	partitions      int
	naive           bool
	naiveTimeout    time.Duration
	naiveBatch      int
	phaseTimeout    time.Duration
	rater           bool
	billing         bool
	ledger          bool
	latencyRate     int
	latencyDuration time.Duration
	out             string
	results         string
	plot            string
	binDir          string
	keep            bool
	profile         bool
	command         string
}

func main() {
	var o options
	sizes := flag.String("sizes", "1m", "data set sizes in generated events, comma separated (k and m suffixes); about 7.5 events per identity")
	flag.BoolVar(&o.sizeIdentities, "sizes.identities", false, "-sizes count identities rather than events (about 7.5 events per identity with the default fleet; with -fleet.rounds 1 -fleet.usage 0, about 2.3 on the joiner's topics)")
	flag.IntVar(&o.fleetRounds, "fleet.rounds", 3, "scan rounds of the generated fleet; 1 observes each identity once (fewer events per identity; stale findings stay at posture retry)")
	flag.IntVar(&o.fleetUsage, "fleet.usage", 1, "usage events per resource and round; 0 generates no usage (then skip the rater and billing phases: -rater=false)")
	memFloor := flag.Float64("mem.floor", 1.5, "stop a consumer phase when the machine's available memory (MemAvailable) falls below this many GiB, and report it, rather than let the kernel's OOM killer pick a process; 0 disables")
	joiners := flag.String("joiners", "1,2,4", "joiner process counts to run, one consumer group each; 0 runs no joiner phase")
	scaling := flag.String("scaling.upTo", "2m", "sizes above this run only the first -joiners count (and its restore), to bound the run's length")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions per topic")
	flag.BoolVar(&o.naive, "naive", true, "run the baseline (bench/naive) on the same topics")
	flag.IntVar(&o.naiveBatch, "naive.batch", 50000, "rows per INSERT of the baseline; 1 runs its row-by-row first version")
	flag.DurationVar(&o.naiveTimeout, "naive.timeout", 3*time.Minute, "stop the naive baseline after this long and report its rate so far")
	flag.DurationVar(&o.phaseTimeout, "timeout", 8*time.Minute, "longest wait for one joiner or rater phase to catch up")
	flag.BoolVar(&o.rater, "rater", true, "run bin/rater over usage.events (rating only, -billing.enabled=false)")
	flag.BoolVar(&o.billing, "billing", true, "run the billing reconciler (bin/rater -rater.enabled=false) over the billing topics after the rater phase, and check rated_usage against the ground truth's totals")
	flag.BoolVar(&o.ledger, "ledger", true, "generate the ledger's entries (billing.ledger, fleet.DefaultLedger) beside the usage, so that the billing reconciler reconciles rated lines against postings rather than opening rated_not_ledgered for every line")
	flag.IntVar(&o.latencyRate, "latency.rate", 100000, "events per second fed during the latency phase (0 skips it); the achieved rate is reported beside it")
	flag.DurationVar(&o.latencyDuration, "latency.duration", 30*time.Second, "length of the latency phase")
	flag.StringVar(&o.out, "out", "bench/out", "directory for stacks, logs and results.json of this run (each run in a new subdirectory)")
	flag.StringVar(&o.results, "results", "", "write the Markdown report to this file (e.g. bench/RESULTS.md); always written to the run directory")
	flag.StringVar(&o.plot, "plot", "", "write the scaling plot to this PNG file (e.g. bench/scaling.png); always written to the run directory")
	flag.StringVar(&o.binDir, "bin", "bin", "directory of the pipeline binaries (make build) and bin/naive")
	flag.BoolVar(&o.profile, "profile", false, "write a CPU profile of every joiner, rater and billing process next to its log (log/<name>.cpu.pprof), and of the harness while it feeds the latency phase (log/latency-feeder.cpu.pprof); with several joiners on few cores, runtime.asyncPreempt takes a share of each member's samples that profiling itself causes (bench/joiner/README.md)")
	render := flag.String("render", "", "run nothing: write the report of an earlier run from its results.json (this path) to -results, e.g. after changing the report's format")
	flag.BoolVar(&o.keep, "keep", false, "keep each stack's broker and ClickHouse data in the run directory (logs are always kept)")
	flag.Parse()
	if *render != "" {
		if err := renderFile(*render, o.results); err != nil {
			log.Fatalf("harness: %v", err)
		}
		return
	}
	o.command = "go run ./bench/harness " + strings.Join(os.Args[1:], " ")
	o.memFloor = int64(*memFloor * (1 << 30))
	var err error
	if o.sizes, err = parseSizes(*sizes); err != nil {
		log.Fatal(err)
	}
	if *joiners == "0" {
		o.joiners = nil
	} else if o.joiners, err = parseInts(*joiners); err != nil {
		log.Fatal(err)
	}
	up, err := parseSizes(*scaling)
	if err != nil || len(up) != 1 {
		log.Fatalf("-scaling.upTo %q: want one size", *scaling)
	}
	o.scalingUpTo = up[0]
	log.SetFlags(log.Ltime)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatalf("harness: %v", err)
	}
}

// renderFile writes the report of the results.json at path to out (the
// run directory's RESULTS.md when out is empty).
func renderFile(path, out string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rep := new(report)
	if err := json.Unmarshal(raw, rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if out == "" {
		out = filepath.Join(filepath.Dir(path), "RESULTS.md")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "scaling.png")); err == nil {
		rep.PlotPath = "scaling.png" // the report links it beside itself
	}
	if err := os.WriteFile(out, []byte(renderMarkdown(rep)), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s", out)
	return nil
}

func run(ctx context.Context, o options) error {
	for _, b := range []string{"broker", "joiner", "rater", "naive"} {
		if _, err := os.Stat(filepath.Join(o.binDir, b)); err != nil {
			return fmt.Errorf("%s/%s missing; Possible solutions: run `make bench` (it builds them), or `make build && go build -o bin/naive ./bench/naive`", o.binDir, b)
		}
	}
	bin, err := filepath.Abs(o.binDir)
	if err != nil {
		return err
	}
	o.binDir = bin
	runDir := filepath.Join(o.out, time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	if runDir, err = filepath.Abs(runDir); err != nil {
		return err
	}
	log.Printf("run directory %s", runDir)

	rep := &report{Started: time.Now().UTC(), Command: o.command, Machine: describeMachine(), Partitions: o.partitions, NaiveBatch: o.naiveBatch}
	for i, size := range o.sizes {
		r, err := runSize(ctx, o, runDir, size, i == 0 && o.latencyRate > 0, rep)
		if r != nil {
			rep.Sizes = append(rep.Sizes, *r)
		}
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("size %s: %v", sizeName(size), err))
			log.Printf("size %s: %v", sizeName(size), err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	rep.Finished = time.Now().UTC()
	rep.Machine.LoadAfter = loadavg()

	raw, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(runDir, "results.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	png := filepath.Join(runDir, "scaling.png")
	if err := writePlot(png, rep); err != nil {
		log.Printf("plot: %v", err)
	} else if o.plot != "" {
		if err := copyFile(png, o.plot); err != nil {
			return err
		}
		rep.PlotPath = o.plot
	}
	md := renderMarkdown(rep)
	if err := os.WriteFile(filepath.Join(runDir, "RESULTS.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if o.results != "" {
		if err := os.WriteFile(o.results, []byte(md), 0o644); err != nil {
			return err
		}
		log.Printf("wrote %s", o.results)
	}
	fmt.Print(md)
	if !o.keep {
		// Last, since deleting ClickHouse's many small parts takes a while.
		for _, size := range o.sizes {
			for _, d := range []string{stack.NameBroker, stack.NameClickHouse} {
				_ = os.RemoveAll(filepath.Join(runDir, "_"+sizeName(size), d))
			}
		}
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d phase(s) failed: %s", len(rep.Errors), strings.Join(rep.Errors, "; "))
	}
	return nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		mult := 1
		switch {
		case strings.HasSuffix(f, "m"):
			mult, f = 1_000_000, strings.TrimSuffix(f, "m")
		case strings.HasSuffix(f, "k"):
			mult, f = 1_000, strings.TrimSuffix(f, "k")
		}
		n, err := strconv.ParseFloat(f, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-sizes: %q is not a size like 1m or 500k", f)
		}
		out = append(out, int(n*float64(mult)))
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers, comma separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func sizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "M"
	case n >= 1_000 && n%100 == 0:
		return strconv.FormatFloat(float64(n)/1e3, 'f', -1, 64) + "k"
	}
	return strconv.Itoa(n)
}

func copyFile(from, to string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, raw, 0o644)
}
