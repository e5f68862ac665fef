package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

type report struct {
	Started    time.Time      `json:"started"`
	Finished   time.Time      `json:"finished"`
	Command    string         `json:"command"`
	Machine    machine        `json:"machine"`
	Partitions int            `json:"partitions"`
	NaiveBatch int            `json:"naive_batch"` // rows per INSERT of the baseline (1: row by row)
	Sizes      []sizeResult   `json:"sizes"`
	Latency    *latencyResult `json:"latency,omitempty"`
	PlotPath   string         `json:"plot,omitempty"`
	Errors     []string       `json:"errors,omitempty"`
}

type sizeResult struct {
	Name   string `json:"name"`
	Unit   string `json:"unit"` // what Name counts: events or identities (-sizes.identities)
	Rounds int    `json:"rounds"`
	// HarnessPeakRSS is the harness's VmHWM after generating and
	// producing (the plan and the truth), before the phases.
	HarnessPeakRSS int64            `json:"harness_peak_rss_bytes"`
	Identities     int              `json:"identities"`
	FleetFlags     string           `json:"fleet_flags"`
	TruthFindings  int              `json:"truth_findings"`
	TruthCounts    map[string]int   `json:"truth_counts"`
	JoinerCounts   map[string]int   `json:"joiner_counts,omitempty"` // first joiner phase, by classification
	Produce        produced         `json:"produce"`
	ProduceUsage   []usage          `json:"produce_usage"`
	JoinedRecords  int64            `json:"joined_records"`
	Joiners        []consumerResult `json:"joiners"`
	Restores       []restoreResult  `json:"restores"`
	Storage        *storageResult   `json:"storage,omitempty"`
	Naive          *consumerResult  `json:"naive,omitempty"`
	NaiveStorage   *storageResult   `json:"naive_storage,omitempty"`
	Rater          *consumerResult  `json:"rater,omitempty"`
	Billing        *consumerResult  `json:"billing,omitempty"`
}

type consumerResult struct {
	Label         string         `json:"label"`
	Processes     int            `json:"processes"`
	Group         string         `json:"group"`
	Database      string         `json:"database"`
	Records       int64          `json:"records"` // committed
	End           int64          `json:"end"`
	CaughtUp      bool           `json:"caught_up"`
	Seconds       float64        `json:"seconds"` // first process start to caught up (or stop)
	FirstCommit   float64        `json:"first_commit_seconds"`
	RecordsPerSec float64        `json:"records_per_second"`
	Usage         []usage        `json:"usage"`
	CPUSeconds    float64        `json:"cpu_seconds"`
	CPUPerMillion float64        `json:"cpu_seconds_per_million"`
	Findings      int            `json:"findings,omitempty"`
	Truth         string         `json:"truth,omitempty"`
	NaiveCounts   map[string]int `json:"naive_counts,omitempty"`
	Samples       []sample       `json:"samples,omitempty"`
	Load          string         `json:"load"` // /proc/loadavg at the start
	// Steady is the part of a joiner phase after its group settled.
	Steady *steadyWindow `json:"steady,omitempty"`
}

// steadyWindow is a joiner phase from the moment its group settled (every
// member owns partitions, the start's rebalances and restores are over)
// until it caught up: the cost per record of joiners that keep running,
// without the start that a phase of a few seconds is weighed by, and which
// differs with the number of members (the first to join takes every
// partition, applies some of each, and hands most back).
type steadyWindow struct {
	Start   float64 `json:"start_seconds"` // settled, seconds after the first process's start
	Seconds float64 `json:"seconds"`       // settled to caught up
	Records int64   `json:"records"`       // the phase's, for reference
	// Events are those the members applied in the window
	// (driftline_joiner_events_total, summed).
	Events        int64   `json:"events"`
	CPUSeconds    float64 `json:"cpu_seconds"` // the joiner processes', summed
	CPUPerMillion float64 `json:"cpu_seconds_per_million"`
	// AllCPUPerMillion adds the broker's and ClickHouse's CPU time.
	AllCPUPerMillion float64 `json:"all_cpu_seconds_per_million"`
}

type restoreResult struct {
	Processes      int     `json:"processes"`
	Partitions     int     `json:"partitions"`
	Seconds        float64 `json:"seconds"`         // first start to every partition assigned and restored
	RestoreSeconds float64 `json:"restore_seconds"` // driftline_joiner_restore_seconds_sum, largest member
	RestoredEvents int64   `json:"restored_events"`
	Restores       int     `json:"restores"`
	FromCheckpoint int     `json:"from_checkpoint"` // driftline_joiner_restore_checkpoints_total, summed
	PeakRSS        int64   `json:"peak_rss_bytes"`
}

type tableSize struct {
	Table string `json:"table"`
	Bytes uint64 `json:"bytes"`
	Rows  uint64 `json:"rows"`
	Parts uint64 `json:"parts"`
}

type storageResult struct {
	Database        string      `json:"database"`
	Tables          []tableSize `json:"tables"`
	Bytes           uint64      `json:"bytes"`
	Findings        int64       `json:"findings"`
	BytesPerFinding float64     `json:"bytes_per_finding"`
}

// ownCPUPerMillion is the CPU time of the stage's own processes (not the
// broker's or ClickHouse's) per million records.
func ownCPUPerMillion(r *consumerResult) float64 {
	var cpu float64
	for _, u := range r.Usage {
		if u.Name != "broker" && u.Name != "clickhouse" {
			cpu += u.CPUSeconds
		}
	}
	if r.Records == 0 {
		return 0
	}
	return cpu / (float64(r.Records) / 1e6)
}

// ownRate is records per CPU second of the stage's own processes.
func ownRate(r *consumerResult) float64 {
	if c := ownCPUPerMillion(r); c > 0 {
		return 1e6 / c
	}
	return 0
}

func firstProcs(s sizeResult) int {
	if len(s.Joiners) > 0 {
		return s.Joiners[0].Processes
	}
	return 0
}

func gib(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// shortPhase is the length of a joiner phase below which the report says
// that fixed costs weigh on its rate.
const shortPhase = 5 * time.Second

// renderMarkdown writes the report as bench/RESULTS.md.
func renderMarkdown(rep *report) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := rep.Machine
	w("# Driftline end-to-end benchmark results\n\n")
	w("Written by `bench/harness` (what each figure means: [README.md](README.md)). ")
	w("Every figure below comes from one run of:\n\n```sh\nmake build && go build -o bin/naive ./bench/naive\n%s\n```\n\n", rep.Command)
	w("(`make bench` runs the harness with the Makefile's `BENCH_SIZES` and `BENCH_FLAGS`, whose defaults reproduce the committed bench/RESULTS.md.)\n\n")
	w("## Machine\n\n")
	w("| | |\n|---|---|\n")
	w("| CPUs (nproc) | %d |\n| CPU model | %s |\n| memory | %.1f GiB |\n| kernel | %s |\n| Go | %s |\n| ClickHouse | %s |\n",
		m.CPUs, m.CPUModel, float64(m.MemTotal)/(1<<30), m.Kernel, m.GoVersion, m.ClickHouse)
	w("| broker | cmd/broker (franz-go kfake, data on local disk, no fsync) |\n")
	w("| load average before / after | %s / %s |\n", m.LoadBefore, m.LoadAfter)
	w("| run | %s to %s (%s) |\n", rep.Started.Format(time.RFC3339), rep.Finished.Format("15:04:05Z"), rep.Finished.Sub(rep.Started).Round(time.Second))
	w("| partitions per topic | %d |\n\n", rep.Partitions)
	w("Broker, ClickHouse, the processes measured and the harness share the same %d CPUs; "+
		"the phases run one after the other on the same topics, so the ratios between them hold even when the machine is noisy.\n\n", m.CPUs)

	for _, s := range rep.Sizes {
		if s.Unit == "identities" {
			w("## %s identities (%s events)\n\n", s.Name, thousands(float64(s.Produce.Lines)))
		} else {
			w("## %s events (%s identities)\n\n", s.Name, thousands(float64(s.Identities)))
		}
		w("Fleet: `fleetgen %s` (seed 1, scan rounds: %d); %s events generated (redeliveries included), %s Kafka records "+
			"(scan markers on every partition), %s of them on the joiner's three topics; ground truth %s findings.\n\n",
			s.FleetFlags, s.Rounds, thousands(float64(s.Produce.Lines)), thousands(float64(s.Produce.Records)), thousands(float64(s.JoinedRecords)), thousands(float64(s.TruthFindings)))

		w("### Throughput per stage\n\n")
		w("| stage | processes | records | time | records/s | CPU s per million records | records per CPU s of the stage's own processes | ratio to baseline | load average at start |\n|---|---|---|---|---|---|---|---|---|\n")
		p := s.Produce
		genRate := float64(p.Lines) / p.GenSecond
		w("| generate (internal/fleet, in the harness) | 1 | %s | %.1f s | %s | | | | |\n", thousands(float64(p.Lines)), p.GenSecond, thousands(genRate))
		var prodCPU float64
		for _, u := range s.ProduceUsage {
			prodCPU += u.CPUSeconds
		}
		w("| produce to the broker (generate + produce, acks=all) | 1 | %s | %.1f s | %s | %.1f (harness not counted) | | | |\n",
			thousands(float64(p.Records)), p.Seconds, thousands(float64(p.Records)/p.Seconds), prodCPU/(float64(p.Records)/1e6))
		naiveRate := 0.0
		if s.Naive != nil {
			naiveRate = s.Naive.RecordsPerSec
		}
		row := func(name string, r *consumerResult) {
			ratio := ""
			if naiveRate > 0 && r != s.Naive {
				ratio = fmt.Sprintf("%.1f×", r.RecordsPerSec/naiveRate)
			} else if r == s.Naive {
				ratio = "1.0×"
			}
			note := ""
			if !r.CaughtUp {
				note = fmt.Sprintf(" (stopped at %.0f%%)", 100*float64(r.Records)/float64(max(r.End, 1)))
			}
			w("| %s | %d | %s%s | %.1f s | **%s** | %.1f | %s | %s | %s |\n", name, r.Processes, thousands(float64(r.Records)), note, r.Seconds, thousands(r.RecordsPerSec), r.CPUPerMillion, thousands(ownRate(r)), ratio, r.Load)
		}
		for i := range s.Joiners {
			row(fmt.Sprintf("joiner: topics to committed findings (bin/joiner x%d)", s.Joiners[i].Processes), &s.Joiners[i])
		}
		if s.Naive != nil {
			row(fmt.Sprintf("%s: topics to committed findings (bin/naive -insert.batch %d)", baselineName(rep.NaiveBatch), rep.NaiveBatch), s.Naive)
		}
		if s.Rater != nil {
			row("rater: usage.events to billing.rated (bin/rater -billing.enabled=false, transactions)", s.Rater)
		}
		if s.Billing != nil {
			row("billing reconciler: usage, rated and ledger topics to ClickHouse (bin/rater -rater.enabled=false)", s.Billing)
		}
		w("\nTime runs from the first process's start (group join and, for the rater, its startup included) until the group's committed offsets reach the end of every partition. ")
		w("CPU seconds count the processes of the stage plus what the broker and ClickHouse used during it (/proc/<pid>/stat utime+stime). " +
			"Records per CPU second counts only the stage's own processes (not broker, ClickHouse): what one core would do, independent of how much of the machine the stage got.\n\n")
		writeGoals(w, rep, s)
		if len(s.Joiners) > 0 && s.Joiners[0].Seconds < shortPhase.Seconds() {
			w("A joiner phase of %.1f s is weighed on by what every phase pays once: the group join and the first fetches, "+
				"before each partition's merge has records of all three topics to release, and the last write, which no next round overlaps. "+
				"The goals are for a joiner that is catching up or keeping up, so the larger sizes measure them.\n\n", s.Joiners[0].Seconds)
		}

		if len(s.Joiners) > 1 {
			writeScaling(w, s.Joiners)
		}

		w("### CPU and memory per process\n\n")
		w("| stage | process | CPU s | CPU s per million records | peak RSS (VmHWM) |\n|---|---|---|---|---|\n")
		all := append([]consumerResult(nil), s.Joiners...)
		if s.Naive != nil {
			all = append(all, *s.Naive)
		}
		if s.Rater != nil {
			all = append(all, *s.Rater)
		}
		if s.Billing != nil {
			all = append(all, *s.Billing)
		}
		for _, r := range all {
			us := append([]usage(nil), r.Usage...)
			sort.SliceStable(us, func(i, j int) bool { return us[i].Name < us[j].Name })
			for _, u := range us {
				per := 0.0
				if r.Records > 0 {
					per = u.CPUSeconds / (float64(r.Records) / 1e6)
				}
				hwm := mib(u.PeakRSS)
				if u.Name == "broker" || u.Name == "clickhouse" {
					hwm += " (since stack start)"
				}
				w("| %s | %s | %.1f | %.1f | %s |\n", r.Label, u.Name, u.CPUSeconds, per, hwm)
			}
		}
		w("\n")

		for _, j := range s.Joiners {
			var lo, hi, sum int64
			var cpu float64
			for _, u := range j.Usage {
				if u.Name == "broker" || u.Name == "clickhouse" {
					continue
				}
				if lo == 0 || u.PeakRSS < lo {
					lo = u.PeakRSS
				}
				hi, sum, cpu = max(hi, u.PeakRSS), sum+u.PeakRSS, cpu+u.CPUSeconds
			}
			if !j.CaughtUp {
				w("- joiner x%d, stopped with %.0f%% of the records committed: peak RSS %s to %s per member, %s summed by then (of a fleet of %s identities, not all applied yet); %.2f CPU s per million records committed, summed over the members.\n",
					j.Processes, 100*float64(j.Records)/float64(max(j.End, 1)), mib(lo), mib(hi), gib(sum), thousands(float64(s.Identities)), cpu/(float64(max(j.Records, 1))/1e6))
				continue
			}
			w("- joiner x%d, %s identities: peak RSS %s to %s per member, **%s summed** (%.0f bytes per identity); %.2f CPU s per million records summed over the members.\n",
				j.Processes, thousands(float64(s.Identities)), mib(lo), mib(hi), gib(sum), float64(sum)/float64(max(s.Identities, 1)), cpu/(float64(max(j.Records, 1))/1e6))
		}
		w("\n")

		if len(s.Joiners) > 0 || s.Naive != nil {
			writeFindings(w, rep, s)
		}
		if s.Billing != nil {
			w("### Billing\n\n- billing reconciler: `rated_usage` against the ground truth's totals per tenant and unit: **%s**.\n\n", s.Billing.Truth)
		}
		if s.Storage != nil {
			w("### ClickHouse bytes per finding\n\n")
			w("`SELECT table, sum(bytes_on_disk), sum(rows), count() FROM system.parts WHERE database = '%s' AND active GROUP BY table` after the joiner phase writing to it (the first whose findings equal the ground truth):\n\n", s.Storage.Database)
			w("| table | bytes on disk | rows | parts |\n|---|---|---|---|\n")
			for _, t := range s.Storage.Tables {
				w("| %s | %s | %s | %d |\n", t.Table, thousands(float64(t.Bytes)), thousands(float64(t.Rows)), t.Parts)
			}
			w("\n%s bytes for %s current findings = **%.0f bytes per finding** (all tables of the read model, history included).",
				thousands(float64(s.Storage.Bytes)), thousands(float64(s.Storage.Findings)), s.Storage.BytesPerFinding)
			if s.NaiveStorage != nil {
				w(" The baseline's one table: %.0f bytes per finding.", s.NaiveStorage.BytesPerFinding)
			}
			w("\n\n")
		}

		if len(s.Restores) > 0 {
			w("### Restore after a restart\n\n")
			w("All members of the group stopped (SIGTERM) and started again at once; time from the first start until every partition is assigned and restored again (sum of `driftline_joiner_partitions_assigned` = %d).\n\n", rep.Partitions)
			w("| joiners | start to serving | restore (largest `driftline_joiner_restore_seconds_sum`) | events replayed | restores | partitions from a checkpoint | peak RSS of a member |\n|---|---|---|---|---|---|---|\n")
			for _, r := range s.Restores {
				w("| %d | %.2f s | %.2f s | %s | %d | %d | %s |\n", r.Processes, r.Seconds, r.RestoreSeconds, thousands(float64(r.RestoredEvents)), r.Restores, r.FromCheckpoint, mib(r.PeakRSS))
			}
			w("\n")
		}
	}
	if rep.PlotPath != "" {
		w("## Scaling\n\n![records/s and restore time by joiner count](scaling.png)\n\n")
		w("Left: joiner records/s (topics to committed findings) for 1, 2 and 4 processes, per data set size, with the baseline. Right: restore time (start to serving) by joiner count.\n\n")
	}
	if l := rep.Latency; l != nil {
		w("## Latency: occurred_at to queryable\n\n")
		w("One joiner on its own topics fed at %s events/s for %.0f s (%s identities, %d partitions), every event's occurred_at the wall clock when produced; load average %s when the feed started. "+
			"%d of the observations disagree with their record and open a stale_lifecycle_state finding each; every %d ms the harness reads the open findings as the query API lists them "+
			"(`reader.Findings`, the read of `GET /v1/drift`: the marks table, then the current rows) until each is there.\n\n",
			thousands(float64(l.Rate)), l.Duration, thousands(float64(l.Identities)), rep.Partitions, l.Load, l.Probes, l.PollMillis)
		w("| target events/s | acknowledged events/s (slowest second) | feeder behind schedule, at most | findings seen | p50 | p99 | max |\n|---|---|---|---|---|---|---|\n")
		w("| %s | **%s** (%s) | %.0f ms | %d of %d | **%.0f ms** | **%.0f ms** | %.0f ms |\n\n",
			thousands(float64(l.Rate)), thousands(l.Achieved), thousands(float64(l.SlowestSecond)), l.Behind, l.Seen, l.Probes, l.P50, l.P99, l.Max)
		w("CPU seconds per million events fed: the feeder (the harness: encoding, producing, polling) %.2f, the joiner %.2f, the broker and ClickHouse %.2f; "+
			"the joiner's peak RSS %s, and %s records not yet committed when the feed stopped (it commits after each flush). "+
			"The joiner flushes every `-joiner.flushInterval` (500 ms by default); latency is that interval, the producer's 5 ms linger, the ClickHouse write and up to one poll.\n\n",
			l.FeederCPU, l.JoinerCPU, l.InfraCPU, mib(l.JoinerPeakRSS), thousands(float64(l.JoinerLag)))
	}
	if len(rep.Errors) > 0 {
		w("## Failed phases\n\n")
		for _, e := range rep.Errors {
			w("- %s\n", strings.ReplaceAll(e, "\n", " "))
		}
		w("\n")
	}
	return b.String()
}

// Performance goals of the pipeline on this kind of machine (2 cores with
// the broker and ClickHouse beside the stage), as the results table states
// them: a joiner at 10M events, its memory at the identities of 10M events,
// the rater and the billing reconciler at 10M events.
const (
	goalJoinerRate   = 800_000 // records/s, one joiner, topics to committed findings
	goalJoinerCPU    = 1.5     // joiner CPU s per million records, its own
	goalScaling      = 1.15    // x2 and x4 cost per record, against x1
	goalRaterRate    = 400_000 // usage records/s, transactions
	goalRaterCPU     = 3.0     // rater CPU s per million records, its own
	goalPeakRSS      = 1 << 30 // bytes, joiner x1, rater, billing reconciler
	goalRateMinEvent = 10_000_000
)

// writeGoals writes the goals that a size measures (those at 10M events
// and above) beside what this run measured.
func writeGoals(w func(string, ...any), rep *report, s sizeResult) {
	if s.Unit == "identities" || s.Produce.Lines < goalRateMinEvent*9/10 {
		return
	}
	type goal struct {
		what, target, measured string
		met                    bool
	}
	var gs []goal
	peak := func(r *consumerResult) int64 {
		var hi int64
		for _, u := range r.Usage {
			if u.Name != "broker" && u.Name != "clickhouse" {
				hi = max(hi, u.PeakRSS)
			}
		}
		return hi
	}
	if len(s.Joiners) > 0 && s.Joiners[0].Processes == 1 && s.Joiners[0].CaughtUp {
		j := &s.Joiners[0]
		gs = append(gs,
			goal{"joiner x1, topics to committed findings", fmt.Sprintf("at least %s records/s", thousands(goalJoinerRate)), thousands(j.RecordsPerSec) + " records/s", j.RecordsPerSec >= goalJoinerRate},
			goal{"joiner x1, its own CPU", fmt.Sprintf("at most %.1f s per million records", goalJoinerCPU), fmt.Sprintf("%.2f s", ownCPUPerMillion(j)), ownCPUPerMillion(j) <= goalJoinerCPU},
			goal{fmt.Sprintf("joiner x1, peak RSS at %s identities", thousands(float64(s.Identities))), "at most 1 GiB", mib(peak(j)), peak(j) <= goalPeakRSS})
		for i := 1; i < len(s.Joiners); i++ {
			r := &s.Joiners[i]
			whole := ownCPUPerMillion(r) / ownCPUPerMillion(j)
			m := fmt.Sprintf("%.2f over the whole phase", whole)
			ok := whole <= goalScaling
			if r.Steady != nil && j.Steady != nil && j.Steady.CPUPerMillion > 0 {
				settled := r.Steady.CPUPerMillion / j.Steady.CPUPerMillion
				m += fmt.Sprintf(", %.2f settled", settled)
				ok = ok && settled <= goalScaling
			}
			gs = append(gs, goal{fmt.Sprintf("joiner x%d, CPU per record against x1", r.Processes), fmt.Sprintf("at most %.2f", goalScaling), m, ok})
		}
	}
	if r := s.Rater; r != nil && r.CaughtUp {
		gs = append(gs,
			goal{"rater, usage to billing.rated with transactions", fmt.Sprintf("at least %s records/s", thousands(goalRaterRate)), thousands(r.RecordsPerSec) + " records/s", r.RecordsPerSec >= goalRaterRate},
			goal{"rater, its own CPU", fmt.Sprintf("at most %.1f s per million records", goalRaterCPU), fmt.Sprintf("%.2f s", ownCPUPerMillion(r)), ownCPUPerMillion(r) <= goalRaterCPU},
			goal{fmt.Sprintf("rater, peak RSS at %s usage records", thousands(float64(r.Records))), "at most 1 GiB", mib(peak(r)), peak(r) <= goalPeakRSS})
	}
	if r := s.Billing; r != nil && r.CaughtUp {
		gs = append(gs, goal{fmt.Sprintf("billing reconciler, peak RSS at %s records", thousands(float64(r.Records))), "at most 1 GiB", mib(peak(r)), peak(r) <= goalPeakRSS})
	}
	if len(gs) == 0 {
		return
	}
	w("### Goals\n\n| goal | target | this run | |\n|---|---|---|---|\n")
	for _, g := range gs {
		v := "not met"
		if g.met {
			v = "met"
		}
		w("| %s | %s | %s | %s |\n", g.what, g.target, g.measured, v)
	}
	w("\n")
	if len(s.Joiners) > 0 && s.Naive != nil && s.Naive.RecordsPerSec > 0 {
		base := "it ran to the end"
		if !s.Naive.CaughtUp {
			base = "it did not catch up within its timeout: its rate is what it committed by then"
		}
		w("Against the baseline (bench/naive, %s: the same job as a competent engineer writes it in a day; %s): joiner x1 did %.1f× its records/s at %.1f× less CPU of its own per record.\n\n",
			insertsName(rep.NaiveBatch), base, s.Joiners[0].RecordsPerSec/s.Naive.RecordsPerSec, ownCPUPerMillion(s.Naive)/ownCPUPerMillion(&s.Joiners[0]))
	}
}

// baselineName names bench/naive as it ran: batched, what a competent
// engineer writes in a day; with batches of one row, its row-by-row first
// version.
func baselineName(batch int) string {
	if batch <= 1 {
		return "row-by-row first version"
	}
	return "baseline (batched inserts)"
}

// insertsName says how bench/naive wrote its findings.
func insertsName(batch int) string {
	if batch <= 1 {
		return "its row-by-row first version"
	}
	return fmt.Sprintf("batched INSERTs of %s rows", thousands(float64(batch)))
}

// writeFindings writes the findings of the joiner phases and the baseline
// against the ground truth.
func writeFindings(w func(string, ...any), rep *report, s sizeResult) {
	w("### Findings\n\n")
	for _, r := range s.Joiners {
		if r.Truth == "" {
			w("- joiner x%d: not compared with the ground truth (the phase did not finish).\n", r.Processes)
			continue
		}
		w("- joiner x%d: %s findings in `%s.drift_evidence`; against the ground truth: **%s**.\n", r.Processes, thousands(float64(r.Findings)), r.Database, r.Truth)
	}
	w("\n| classification | ground truth | joiner x%d | %s |\n|---|---|---|---|\n", firstProcs(s), baselineName(rep.NaiveBatch))
	classes := map[string]bool{}
	naive := map[string]int{}
	if s.Naive != nil {
		for k, v := range s.Naive.NaiveCounts {
			c, _, _ := strings.Cut(k, " ")
			naive[c] += v
			classes[c] = true
		}
	}
	for c := range s.TruthCounts {
		classes[c] = true
	}
	for c := range s.JoinerCounts {
		classes[c] = true
	}
	keys := make([]string, 0, len(classes))
	for c := range classes {
		keys = append(keys, c)
	}
	sort.Strings(keys)
	for _, c := range keys {
		nv := "-"
		if s.Naive != nil {
			nv = thousands(float64(naive[c]))
		}
		w("| %s | %s | %s | %s |\n", c, thousands(float64(s.TruthCounts[c])), thousands(float64(s.JoinerCounts[c])), nv)
	}
	w("\nCounts of current findings (open and resolved) per classification. The baseline ignores node-agent evidence (the ground truth's identity_mismatch includes cloned nodes seen in heartbeats) and quota; when it stopped before the end, its counts are partial.\n\n")
}

// writeScaling writes the cost per record of each joiner count against
// the first's: over the whole phase, and over its settled window.
func writeScaling(w func(string, ...any), js []consumerResult) {
	w("### Cost per record by joiner count\n\n")
	w("CPU seconds of the joiner processes, summed over the members, per million records: over the whole phase (start, group join and the rebalances as members join included), " +
		"and over the phase once the group settled (every member owns partitions; per million events the members applied, `driftline_joiner_events_total`) until it caught up. " +
		"On a machine of few cores the members share them, so CPU time per record, not records/s, is what compares the counts.\n\n")
	w("| joiners | whole phase: CPU s per million records | ratio to x%d | settled after | settled window: events (seconds) | CPU s per million events | ratio to x%d | with broker and ClickHouse |\n|---|---|---|---|---|---|---|---|\n",
		js[0].Processes, js[0].Processes)
	base := ownCPUPerMillion(&js[0])
	var steadyBase float64
	if js[0].Steady != nil {
		steadyBase = js[0].Steady.CPUPerMillion
	}
	ratio := func(v, b float64) string {
		if b <= 0 || v <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v/b)
	}
	for i := range js {
		j := &js[i]
		own := ownCPUPerMillion(j)
		if st := j.Steady; st != nil {
			w("| %d | %.2f | %s | %.1f s | %s (%.1f s) | **%.2f** | **%s** | %.2f |\n", j.Processes, own, ratio(own, base),
				st.Start, thousands(float64(st.Events)), st.Seconds, st.CPUPerMillion, ratio(st.CPUPerMillion, steadyBase), st.AllCPUPerMillion)
		} else {
			w("| %d | %.2f | %s | not settled before catching up | | | | |\n", j.Processes, own, ratio(own, base))
		}
	}
	w("\n")
}
