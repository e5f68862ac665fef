package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

type latencyResult struct {
	Rate       int     `json:"rate"`
	Duration   float64 `json:"duration_seconds"`
	Identities int     `json:"identities"`
	Load       string  `json:"load"` // /proc/loadavg when the feed started
	Sent       int64   `json:"sent"`
	// Acked are the records the broker acknowledged during the feed;
	// Achieved is Acked over the feed's length, SlowestSecond the fewest
	// acknowledged in one whole second of it.
	Acked         int64   `json:"acked"`
	Achieved      float64 `json:"achieved_rate"`
	SlowestSecond int64   `json:"slowest_second"`
	// Behind is the most the feeder fell behind its schedule, in ms
	// (a tick is 10 ms, so 10 is on time).
	Behind float64 `json:"behind_ms"`
	// FeederCPU is the harness's CPU time during the feed (encoding,
	// producing and the poller), per million events.
	FeederCPU float64 `json:"feeder_cpu_seconds_per_million"`
	// JoinerCPU is the joiner's CPU time during the feed, per million
	// events; JoinerLag the records not yet committed when the feed
	// stopped.
	JoinerCPU float64 `json:"joiner_cpu_seconds_per_million"`
	// InfraCPU is the broker's and ClickHouse's CPU time during the
	// feed, per million events.
	InfraCPU      float64 `json:"infra_cpu_seconds_per_million"`
	JoinerLag     int64   `json:"joiner_lag_records"`
	JoinerPeakRSS int64   `json:"joiner_peak_rss_bytes"`
	Probes        int     `json:"probes"`
	Seen          int     `json:"seen"`
	PollMillis    int     `json:"poll_ms"`
	P50           float64 `json:"p50_ms"`
	P99           float64 `json:"p99_ms"`
	Max           float64 `json:"max_ms"`
}

const (
	latencyProbesPerSec = 10
	latencyPoll         = 50 * time.Millisecond
	latencyTick         = 10 * time.Millisecond
	// latencyPage is the page the poller asks the query API's read for;
	// every probe's finding fits in it.
	latencyPage = 5000
)

// latencyPhase feeds one joiner on topics of its own at a fixed rate with
// events whose occurred_at is the wall clock, and measures how long a
// finding takes from its event's occurred_at until the query API's
// listing of open findings (reader.Findings, what GET /v1/drift reads)
// returns it.
func (e *env) latencyPhase(ctx context.Context, logf func(string, ...any)) (*latencyResult, error) {
	o := e.o
	names := contract.DefaultTopics()
	names.PlatformRecords = "bench-latency.platform.records"
	names.Observations = "bench-latency.provider.observations"
	names.Telemetry = "bench-latency.nodeagent.telemetry"
	if err := topics.Ensure(ctx, e.adm, names, int32(o.partitions), 1); err != nil {
		return nil, err
	}
	db, group := "bench_latency", "bench-latency"
	if err := e.migrate(ctx, db); err != nil {
		return nil, err
	}
	cfg := e.st.ClickHouse()
	cfg.Database = db
	rconn, err := readmodel.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rconn.Close()
	read := reader.New(rconn, reader.Options{})

	res := &latencyResult{Rate: o.latencyRate, Duration: o.latencyDuration.Seconds(), PollMillis: int(latencyPoll / time.Millisecond)}
	healthy := max(o.latencyRate, 1000) // each observed about once per second
	probes := min(int(o.latencyDuration.Seconds()*latencyProbesPerSec)+1, latencyPage)
	res.Identities = healthy + probes

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.st.BrokerAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Batches of 5 ms: at 100,000 events/s that is about 60 records
		// per partition and request rather than 12, which halves the
		// broker's and the joiner's per-batch work; the linger is inside
		// the latency measured, since occurred_at is stamped before it.
		kgo.ProducerLinger(5*time.Millisecond),
		// Room for two seconds of the feed, so that a slow ack does not
		// stall the schedule; a broker that cannot keep up shows as fewer
		// acks, not as a slower feeder.
		kgo.MaxBufferedRecords(max(2*o.latencyRate, 10_000)))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	gen := newLatencyGen(int32(o.partitions), names, healthy, probes)
	// Every record first, then start the joiner and wait until it has
	// committed them, so the phase measures the steady state.
	for i := range healthy {
		cl.Produce(ctx, gen.record(&gen.healthy[i], time.Now()), nil)
	}
	for i := range probes {
		cl.Produce(ctx, gen.record(&gen.probes[i], time.Now()), nil)
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	addr := freeAddr()
	j, err := startChild("latency-joiner", filepath.Join(o.binDir, "joiner"),
		[]string{"-joiner.addr", addr, "-joiner.group", group, "-clickhouse.db", db,
			"-topic.records", names.PlatformRecords, "-topic.observations", names.Observations, "-topic.telemetry", names.Telemetry},
		e.childEnv(), filepath.Join(e.dir, "log"), addr)
	if err != nil {
		return nil, err
	}
	defer j.stop(30 * time.Second)
	if p, done, _, err := watch(ctx, e.adm, group, names.Joined(), j.started, 2*time.Minute, func() error {
		if j.exited() {
			return fmt.Errorf("latency joiner exited: %v\n%s", j.err, j.tail(2000))
		}
		return nil
	}, logf); err != nil || done.IsZero() {
		return nil, fmt.Errorf("latency joiner did not catch up with the records (%s): %v", describeLag(p), err)
	}
	logf("latency: %d records applied; feeding %d events/s for %v", res.Identities, o.latencyRate, o.latencyDuration)

	// The poller: outstanding probes by provider id -> occurred_at.
	type probe struct {
		id string
		at time.Time
	}
	probeCh := make(chan probe, probes)
	var lat []float64
	pollDone := make(chan error, 1)
	var feeding atomic.Bool
	feeding.Store(true)
	filter := reader.Filter{Providers: []string{contract.ProviderAppRuntime}, Classifications: []string{string(contract.ClassStale)}, Status: string(contract.StatusOpen)}
	go func() {
		outstanding := map[string]time.Time{}
		var idle time.Time
		for {
			drained := false
			for !drained {
				select {
				case p := <-probeCh:
					outstanding[p.id] = p.at
				default:
					drained = true
				}
			}
			if len(outstanding) > 0 {
				fs, err := read.Findings(ctx, filter, reader.DriftSorts[0], nil, latencyPage)
				if err != nil {
					pollDone <- err
					return
				}
				now := time.Now()
				for _, f := range fs {
					if at, ok := outstanding[f.ProviderID]; ok {
						lat = append(lat, float64(now.Sub(at).Microseconds())/1000)
						delete(outstanding, f.ProviderID)
					}
				}
			}
			if !feeding.Load() {
				if idle.IsZero() {
					idle = time.Now()
				}
				if len(outstanding) == 0 && len(probeCh) == 0 || time.Since(idle) > 30*time.Second || ctx.Err() != nil {
					pollDone <- nil
					return
				}
			}
			time.Sleep(latencyPoll)
		}
	}()

	// The feed: every tick, the events the schedule owes by then. Acks
	// are counted per second of the feed.
	seconds := int(o.latencyDuration/time.Second) + 1
	acked := make([]atomic.Int64, seconds+60)
	rng := rand.New(rand.NewPCG(1, 2))
	probeEvery := max(o.latencyRate/latencyProbesPerSec, 1)
	var sent int64
	probeN := 0
	var ferr atomic.Pointer[error]
	var start time.Time
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			ferr.CompareAndSwap(nil, &err)
			return
		}
		if s := int(time.Since(start) / time.Second); s < len(acked) {
			acked[s].Add(1)
		}
	}
	res.Load = loadavg()
	feederCPU, _ := cpuSeconds(os.Getpid())
	joinerCPU, _ := cpuSeconds(j.pid())
	infra := markCPU(e.infra)
	if o.profile {
		stop, err := profileSelf(filepath.Join(e.dir, "log", "latency-feeder.cpu.pprof"))
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	start = time.Now()
	var behind time.Duration
	for ctx.Err() == nil && ferr.Load() == nil {
		now := time.Now()
		elapsed := now.Sub(start)
		if elapsed >= o.latencyDuration {
			break
		}
		due := int64(elapsed.Seconds() * float64(o.latencyRate))
		if d := time.Duration(float64(due-sent) / float64(o.latencyRate) * float64(time.Second)); d > behind {
			behind = d
		}
		for ; sent < due; sent++ {
			if sent%int64(probeEvery) == 0 && probeN < probes {
				id := &gen.probes[probeN]
				probeN++
				at := time.Now()
				cl.Produce(ctx, gen.observation(id, "stopped", at), promise)
				probeCh <- probe{id.pid, at}
				continue
			}
			cl.Produce(ctx, gen.observation(&gen.healthy[rng.IntN(healthy)], "running", now), promise)
		}
		time.Sleep(latencyTick - time.Since(now))
	}
	elapsed := time.Since(start)
	if c, err := cpuSeconds(os.Getpid()); err == nil {
		res.FeederCPU = (c - feederCPU) / (float64(sent) / 1e6)
	}
	if c, err := cpuSeconds(j.pid()); err == nil {
		res.JoinerCPU = (c - joinerCPU) / (float64(sent) / 1e6)
	}
	for _, u := range infra.since() {
		res.InfraCPU += u.CPUSeconds / (float64(sent) / 1e6)
	}
	if p, err := groupProgress(ctx, e.adm, group, names.Joined()); err == nil {
		res.JoinerLag = p.End - p.Committed
	}
	ferr2 := cl.Flush(ctx)
	feeding.Store(false)
	perr := <-pollDone
	res.JoinerPeakRSS, _ = peakRSS(j.pid())
	if p := ferr.Load(); p != nil {
		return nil, *p
	}
	if ferr2 != nil {
		return nil, ferr2
	}
	if perr != nil {
		return nil, perr
	}
	res.Sent = sent
	res.Behind = float64(behind.Microseconds()) / 1000
	whole := int(elapsed / time.Second)
	res.SlowestSecond = -1
	for s := range acked {
		n := acked[s].Load()
		if s < whole {
			res.Acked += n
			if res.SlowestSecond < 0 || n < res.SlowestSecond {
				res.SlowestSecond = n
			}
		}
	}
	res.Achieved = float64(res.Acked) / float64(max(whole, 1))
	res.Probes = probeN
	res.Seen = len(lat)
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		res.P50 = lat[n/2]
		res.P99 = lat[min(n-1, n*99/100)]
		res.Max = lat[n-1]
	}
	logf("latency: %d events sent, %.0f/s acknowledged over %d whole seconds (slowest second %d, feeder at most %.0f ms behind); "+
		"CPU s per million events: feeder %.2f, joiner %.2f, broker and ClickHouse %.2f; joiner %d records behind at the end; %d of %d findings seen; p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		sent, res.Achieved, whole, res.SlowestSecond, res.Behind, res.FeederCPU, res.JoinerCPU, res.InfraCPU, res.JoinerLag, res.Seen, res.Probes, res.P50, res.P99, res.Max)
	return res, nil
}

// latencyGen writes app_runtime records and observations in the contract's
// envelope, as the fleet generator does. Provider ids, keys and partitions
// are computed once, and values are appended to slabs without fmt, so
// that one core of the harness feeds well above 100,000 events/s.
type latencyGen struct {
	names   contract.Topics
	healthy []latencyID // observed running
	probes  []latencyID // observed stopped once each
	headers []kgo.RecordHeader
	slab    []byte
	counter uint64
	recSeq  uint64
	obsSeq  uint64
}

// latencyID is one identity's provider id, key and partition.
type latencyID struct {
	pid       string
	key       []byte
	partition int32
}

func newLatencyGen(parts int32, names contract.Topics, healthy, probes int) *latencyGen {
	g := &latencyGen{names: names, headers: []kgo.RecordHeader{
		{Key: contract.HeaderActorID, Value: []byte("SYSTEM::bench-harness")},
		{Key: contract.HeaderSourceType, Value: []byte(contract.SourceSystem)},
	}}
	add := func(prefix string, n int) []latencyID {
		ids := make([]latencyID, n)
		for i := range ids {
			pid := prefix + fmt.Sprintf("%07d", i)
			k := []byte(contract.IdentityKey(contract.ProviderAppRuntime, pid))
			ids[i] = latencyID{pid, k, contract.Partition(k, parts)}
		}
		return ids
	}
	g.healthy, g.probes = add("app-lat-", healthy), add("app-latp-", probes)
	return g
}

// alloc returns n bytes of a slab: values stay untouched until the
// producer has sent them.
func (g *latencyGen) alloc(n int) []byte {
	if len(g.slab) < n {
		g.slab = make([]byte, max(1<<20, n))
	}
	b := g.slab[:0:n]
	g.slab = g.slab[n:]
	return b
}

func (g *latencyGen) rec(topic string, id *latencyID, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: id.key, Value: value, Partition: id.partition, Headers: g.headers}
}

// head appends the envelope up to the payload's opening brace.
func (g *latencyGen) head(b []byte, eventType, producer string, seq uint64, now time.Time) []byte {
	g.counter++
	ms := uint64(now.UnixMilli())
	b = append(b, `{"event_id":"`...)
	// odd multiplier: a bijection of the counter, so ids never repeat
	b = fleet.AppendULID(b, ms<<16|(g.counter>>48)&0xffff, g.counter*0x9e3779b97f4a7c15)
	b = append(b, `","event_type":"`...)
	b = append(b, eventType...)
	b = append(b, `","schema_version":1,"producer":"`...)
	b = append(b, producer...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"occurred_at":"`...)
	b = now.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, `","correlation_id":"bench-latency","environment":"local_parity","payload":{`...)
}

func (g *latencyGen) record(id *latencyID, now time.Time) *kgo.Record {
	pid := id.pid
	g.recSeq++
	b := g.head(make([]byte, 0, 640), contract.TypePlatformRecord, "bench-latency-records", g.recSeq, now)
	b = append(b, `"record_type":"app_instance","record_id":"rec-`...)
	b = append(b, pid...)
	b = append(b, `","record_version":1,"resource_family":"app_runtime","product_id":"app-platform","owning_domain":"app-platform","owning_package":"app-platform/runtime","domain_id":"dom-bench","tags":["domain:bench"],"provider":"app_runtime","provider_id":"`...)
	b = append(b, pid...)
	b = append(b, `","expected_state":"running","expected_version":"v1","deleted":false}}`...)
	return g.rec(g.names.PlatformRecords, id, b)
}

func (g *latencyGen) observation(id *latencyID, state string, now time.Time) *kgo.Record {
	pid := id.pid
	g.obsSeq++
	// 512 holds an observation (about 440 bytes) without a second copy.
	b := g.head(g.alloc(512), contract.TypeProviderObservation, "bench-latency-scanner", g.obsSeq, now)
	b = append(b, `"provider":"app_runtime","provider_id":"`...)
	b = append(b, pid...)
	b = append(b, `","resource_family":"app_runtime","observed_state":"`...)
	b = append(b, state...)
	b = append(b, `","observed_version":"v1","owner_ref":"rec-`...)
	b = append(b, pid...)
	b = append(b, `"}}`...)
	return g.rec(g.names.Observations, id, b)
}
