package main

import (
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
)

// burnSink keeps TestProcReadings's loop from being optimised away.
var burnSink int

func TestProcReadings(t *testing.T) {
	// Burn CPU until the counter moves off zero: on a loaded machine 50 ms
	// of wall time may get less than one clock tick of CPU.
	var cpu float64
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for x := 0; x < 1_000_000; x++ {
			burnSink += x * x
		}
		if cpu, err = cpuSeconds(os.Getpid()); err != nil || cpu > 0 {
			break
		}
	}
	if err != nil || cpu <= 0 {
		t.Fatalf("cpuSeconds = %v, %v", cpu, err)
	}
	hwm, err := peakRSS(os.Getpid())
	if err != nil || hwm < 1<<20 {
		t.Fatalf("peakRSS = %d, %v", hwm, err)
	}
	if _, err := cpuSeconds(-1); err == nil {
		t.Fatal("cpuSeconds of no process: no error")
	}
}

func TestFleetConfigSizes(t *testing.T) {
	for _, events := range []int{100_000, 1_000_000, 10_000_000} {
		cfg := fleet.SizedConfig(events)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%d: %v", events, err)
		}
		ids := cfg.Domains * (cfg.NodesPerDomain + cfg.AppsPerDomain + cfg.VolumesPerDomain + cfg.EndpointsPerDomain)
		if want := events * 2 / 15; ids < want*95/100 || ids > want*105/100 {
			t.Errorf("%d events: %d identities, want about %d", events, ids, want)
		}
	}
	// The 7.5 events per identity the sizes assume, on a small fleet.
	g, err := fleet.New(fleet.SizedConfig(30_000))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = g.Emit(func(*fleet.Event) error { n++; return nil })
	if n < 27_000 || n > 33_000 {
		t.Errorf("SizedConfig(30000) generates %d events", n)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1m, 500k,2.5M,1000")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1000000 500000 2500000 1000]" {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"", "x", "-1m", "0"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q): no error", bad)
		}
	}
	if sizeName(1_000_000) != "1M" || sizeName(10_000_000) != "10M" || sizeName(100_000) != "100k" {
		t.Errorf("sizeName: %s %s %s", sizeName(1_000_000), sizeName(10_000_000), sizeName(100_000))
	}
}

func TestScrapeSumsLabels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP driftline_joiner_partitions_assigned x
driftline_joiner_partitions_assigned 3
driftline_joiner_restore_seconds_sum 1.5
driftline_joiner_restore_seconds_count 2
driftline_joiner_restore_events_total{topic="a"} 10
driftline_joiner_restore_events_total{topic="b"} 5
driftline_joiner_restore_events_totally_other 99
`)
	}))
	defer srv.Close()
	c := &child{name: "t", metrics: srv.URL}
	m, err := c.scrape(context.Background(), "driftline_joiner_partitions_assigned", "driftline_joiner_restore_seconds_sum",
		"driftline_joiner_restore_events_total", "driftline_joiner_missing")
	if err != nil {
		t.Fatal(err)
	}
	if m["driftline_joiner_partitions_assigned"] != 3 || m["driftline_joiner_restore_seconds_sum"] != 1.5 ||
		m["driftline_joiner_restore_events_total"] != 15 || m["driftline_joiner_missing"] != 0 {
		t.Fatalf("scrape = %v", m)
	}
}

func TestReportAndPlot(t *testing.T) {
	naive := consumerResult{Label: "naive", Processes: 1, Records: 1000, End: 5000, Seconds: 10, RecordsPerSec: 100,
		NaiveCounts: map[string]int{"stale_lifecycle_state open": 3}}
	rep := &report{Command: "go run ./bench/harness -sizes 1m", Partitions: 8, Machine: machine{CPUs: 2},
		Sizes: []sizeResult{{
			Name: "1M", Identities: 133332, TruthFindings: 4, TruthCounts: map[string]int{"stale_lifecycle_state": 4},
			JoinerCounts: map[string]int{"stale_lifecycle_state": 4},
			Produce:      produced{Lines: 10, Records: 12, Seconds: 1, GenSecond: 0.5},
			Joiners: []consumerResult{
				{Label: "joiner x1", Processes: 1, Records: 5000, End: 5000, CaughtUp: true, Seconds: 1, RecordsPerSec: 5000, Truth: "equal"},
				{Label: "joiner x2", Processes: 2, Records: 5000, End: 5000, CaughtUp: true, Seconds: 0.5, RecordsPerSec: 10000, Truth: "equal"},
			},
			Restores: []restoreResult{{Processes: 1, Seconds: 2}, {Processes: 2, Seconds: 1.5}},
			Naive:    &naive,
		}},
		Latency: &latencyResult{Rate: 100, Probes: 3, Seen: 3, P50: 400, P99: 900},
	}
	path := filepath.Join(t.TempDir(), "plot.png")
	if err := writePlot(path, rep); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() < 500 {
		t.Fatalf("plot %v", img.Bounds())
	}
	rep.PlotPath = path
	md := renderMarkdown(rep)
	for _, want := range []string{"**5,000**", "50.0×", "100.0×", "(stopped at 20%)", "| 2 | 1.50 s |", "| stale_lifecycle_state | 4 | 4 | 3 |", "p99", "go run ./bench/harness -sizes 1m"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// A phase of 1 s says that fixed costs weigh on its rate; one of
	// shortPhase or longer does not.
	if !strings.Contains(md, "A joiner phase of 1.0 s is weighed on") {
		t.Errorf("short phase not marked:\n%s", md)
	}
	// A phase stopped before the end was not compared with the truth.
	rep.Sizes[0].Joiners[1].Truth = ""
	if md := renderMarkdown(rep); !strings.Contains(md, "- joiner x2: not compared with the ground truth") {
		t.Errorf("a phase without a comparison is not marked:\n%s", md)
	}
	rep.Sizes[0].Joiners[0].Seconds = shortPhase.Seconds()
	if md := renderMarkdown(rep); strings.Contains(md, "is weighed on") {
		t.Errorf("phase of %v marked short", shortPhase)
	}
}

// A size of 10M events or more states each goal it measures beside the
// run's figure, met or not; a smaller size states none.
func TestReportGoals(t *testing.T) {
	mb := int64(1 << 20)
	joiner := func(procs int, cpu float64, rss int64, steady float64) consumerResult {
		return consumerResult{Processes: procs, Records: 10_000_000, End: 10_000_000, CaughtUp: true, Seconds: 10, RecordsPerSec: 1_000_000,
			Usage:  []usage{{Name: "joiner", CPUSeconds: cpu * 10, PeakRSS: rss * mb}, {Name: "clickhouse", CPUSeconds: 99, PeakRSS: 9999 * mb}},
			Steady: &steadyWindow{CPUPerMillion: steady}}
	}
	rater := consumerResult{Records: 4_000_000, End: 4_000_000, CaughtUp: true, RecordsPerSec: 300_000,
		Usage: []usage{{Name: "rater", CPUSeconds: 8, PeakRSS: 800 * mb}}}
	naive := consumerResult{Records: 10_000_000, End: 10_000_000, CaughtUp: true, RecordsPerSec: 100_000,
		Usage: []usage{{Name: "naive", CPUSeconds: 150}}}
	s := sizeResult{Name: "10M", Identities: 1_333_314, Produce: produced{Lines: 13_735_642},
		Joiners: []consumerResult{joiner(1, 1.4, 900, 1.4), joiner(2, 1.5, 500, 1.7)}, Rater: &rater, Naive: &naive}
	rep := &report{NaiveBatch: 50000}
	var b strings.Builder
	writeGoals(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, rep, s)
	md := b.String()
	for _, want := range []string{
		"| joiner x1, topics to committed findings | at least 800,000 records/s | 1,000,000 records/s | met |",
		"| joiner x1, its own CPU | at most 1.5 s per million records | 1.40 s | met |",
		"| joiner x1, peak RSS at 1,333,314 identities | at most 1 GiB | 900 MiB | met |",
		"| joiner x2, CPU per record against x1 | at most 1.15 | 1.07 over the whole phase, 1.21 settled | not met |",
		"| rater, usage to billing.rated with transactions | at least 400,000 records/s | 300,000 records/s | not met |",
		"| rater, its own CPU | at most 3.0 s per million records | 2.00 s | met |",
		"joiner x1 did 10.0× its records/s at 10.7× less CPU",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("goals lack %q:\n%s", want, md)
		}
	}
	b.Reset()
	s.Produce.Lines = 1_373_770
	writeGoals(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, rep, s)
	if b.Len() != 0 {
		t.Errorf("a 1M run states goals:\n%s", b.String())
	}
}

// The latency feeder writes its events without fmt; each must still be an
// event the contract accepts, keyed and partitioned as the gateway would.
func TestLatencyGenValid(t *testing.T) {
	g := newLatencyGen(8, contract.DefaultTopics(), 3, 2)
	v := contract.Validator{Environment: contract.EnvLocalParity}
	now := time.Date(2026, 11, 25, 3, 4, 5, 6_000_000, time.UTC)
	var recs []*kgo.Record
	for i := range g.healthy {
		recs = append(recs, g.record(&g.healthy[i], now), g.observation(&g.healthy[i], "running", now))
	}
	recs = append(recs, g.observation(&g.probes[1], "stopped", now))
	ids := map[string]bool{}
	for _, r := range recs {
		env, p, verr := v.DecodeEvent(r.Value)
		if verr != nil {
			t.Fatalf("%s: %v", r.Value, verr)
		}
		if ids[env.EventID] {
			t.Fatalf("event id %s repeated", env.EventID)
		}
		ids[env.EventID] = true
		if !env.OccurredAt.Equal(now.Truncate(time.Millisecond)) {
			t.Errorf("occurred_at %v, want %v", env.OccurredAt, now)
		}
		var pid string
		switch p := p.(type) {
		case *contract.PlatformRecord:
			pid = p.ProviderID
		case *contract.Observation:
			pid = p.ProviderID
		default:
			t.Fatalf("payload %T", p)
		}
		if key := contract.IdentityKey(contract.ProviderAppRuntime, pid); string(r.Key) != key || r.Partition != contract.Partition(r.Key, 8) {
			t.Errorf("%s: key %s partition %d, want %s partition %d", pid, r.Key, r.Partition, key, contract.Partition(r.Key, 8))
		}
	}
	if o := g.observation(&g.probes[1], "stopped", now); !strings.Contains(string(o.Value), `"provider_id":"app-latp-0000001"`) || !strings.Contains(string(o.Value), `"observed_state":"stopped"`) {
		t.Errorf("probe observation %s", o.Value)
	}
}

// -sizes.identities with one round and no usage: the fleet has the
// identities asked for, each with its record, in about 2.3 events each.
func TestFleetConfigIdentities(t *testing.T) {
	o := options{sizeIdentities: true, fleetRounds: 1, fleetUsage: 0}
	for _, ids := range []int{30_000, 10_000_000} {
		cfg, unit := fleetConfig(o, ids)
		if unit != "identities" {
			t.Fatalf("unit %q", unit)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%d: %v", ids, err)
		}
		got := cfg.Domains * (cfg.NodesPerDomain + cfg.AppsPerDomain + cfg.VolumesPerDomain + cfg.EndpointsPerDomain)
		if got < ids*99/100 || got > ids*101/100 {
			t.Errorf("%d identities asked: %d", ids, got)
		}
	}
	cfg, _ := fleetConfig(o, 30_000)
	g, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]int{}
	_ = g.Emit(func(ev *fleet.Event) error { byType[ev.Type]++; return nil })
	n := 0
	for _, c := range byType {
		n += c
	}
	if byType[contract.TypeUsageRecorded] != 0 || n < 60_000 || n > 75_000 || byType[contract.TypePlatformRecord] < 30_000 {
		t.Errorf("30,000 identities in one round: %d events, %v", n, byType)
	}
	if def, _ := fleetConfig(options{fleetRounds: 3, fleetUsage: 1}, 1_000_000); def.Rounds != fleet.SizedConfig(1_000_000).Rounds || def.UsagePerResource != 1 {
		t.Errorf("the default sizes changed: %+v", def)
	}
}
