package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

type latencyResult struct {
	Rate       int     `json:"rate"`
	Duration   float64 `json:"duration_seconds"`
	Identities int     `json:"identities"`
	Sent       int64   `json:"sent"`
	Achieved   float64 `json:"achieved_rate"`
	Probes     int     `json:"probes"`
	Seen       int     `json:"seen"`
	PollMillis int     `json:"poll_ms"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
}

const (
	latencyProbesPerSec = 10
	latencyPoll         = 50 * time.Millisecond
)

// latencyPhase feeds one joiner on topics of its own at a fixed rate with
// events whose occurred_at is the wall clock, and measures how long a
// finding takes from its event's occurred_at until a query sees it.
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
	res := &latencyResult{Rate: o.latencyRate, Duration: o.latencyDuration.Seconds(), PollMillis: int(latencyPoll / time.Millisecond)}
	healthy := max(o.latencyRate, 1000) // each observed about once per second
	probes := int(o.latencyDuration.Seconds()*latencyProbesPerSec) + 1
	res.Identities = healthy + probes

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.st.BrokerAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	gen := &latencyGen{parts: int32(o.partitions), names: names}
	// Every record first, then start the joiner and wait until it has
	// committed them, so the phase measures the steady state.
	for i := range healthy {
		cl.Produce(ctx, gen.record(fmt.Sprintf("app-lat-%07d", i), time.Now()), nil)
	}
	for i := range probes {
		cl.Produce(ctx, gen.record(fmt.Sprintf("app-latp-%07d", i), time.Now()), nil)
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
				ids := make([]string, 0, len(outstanding))
				for id := range outstanding {
					ids = append(ids, "'"+id+"'")
				}
				rows, err := e.conn.Query(ctx, `SELECT provider_id FROM `+db+`.drift_evidence WHERE provider_id IN (`+strings.Join(ids, ",")+`)`)
				if err != nil {
					pollDone <- err
					return
				}
				now := time.Now()
				for rows.Next() {
					var id string
					if rows.Scan(&id) == nil {
						if at, ok := outstanding[id]; ok {
							lat = append(lat, float64(now.Sub(at).Microseconds())/1000)
							delete(outstanding, id)
						}
					}
				}
				rows.Close()
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

	// The feed: 100 ticks per second, each with its share of the rate.
	rng := rand.New(rand.NewPCG(1, 2))
	tick := 10 * time.Millisecond
	perTick := float64(o.latencyRate) * tick.Seconds()
	start := time.Now()
	next := start
	owed := 0.0
	probeEvery := o.latencyRate / latencyProbesPerSec
	sent, probeN := 0, 0
	var ferr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			ferr.CompareAndSwap(nil, &err)
		}
	}
	for time.Since(start) < o.latencyDuration && ctx.Err() == nil && ferr.Load() == nil {
		owed += perTick
		for ; owed >= 1; owed-- {
			now := time.Now()
			if probeEvery > 0 && sent%probeEvery == 0 && probeN < probes {
				id := fmt.Sprintf("app-latp-%07d", probeN)
				probeN++
				cl.Produce(ctx, gen.observation(id, "stopped", now), promise)
				probeCh <- probe{id, now}
			} else {
				cl.Produce(ctx, gen.observation(fmt.Sprintf("app-lat-%07d", rng.IntN(healthy)), "running", now), promise)
			}
			sent++
		}
		next = next.Add(tick)
		time.Sleep(time.Until(next))
	}
	elapsed := time.Since(start)
	ferr2 := cl.Flush(ctx)
	feeding.Store(false)
	perr := <-pollDone
	if p := ferr.Load(); p != nil {
		return nil, *p
	}
	if ferr2 != nil {
		return nil, ferr2
	}
	if perr != nil {
		return nil, perr
	}
	res.Sent = int64(sent)
	res.Achieved = float64(sent) / elapsed.Seconds()
	res.Probes = probeN
	res.Seen = len(lat)
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		res.P50 = lat[n/2]
		res.P99 = lat[min(n-1, n*99/100)]
		res.Max = lat[n-1]
	}
	logf("latency: %d events at %.0f/s; %d of %d findings seen; p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		sent, res.Achieved, res.Seen, res.Probes, res.P50, res.P99, res.Max)
	return res, nil
}

// latencyGen writes app_runtime records and observations in the contract's
// envelope, as the fleet generator does.
type latencyGen struct {
	parts   int32
	names   contract.Topics
	counter uint64
	recSeq  uint64
	obsSeq  uint64
}

func (g *latencyGen) id(now time.Time) string {
	g.counter++
	ms := uint64(now.UnixMilli())
	// odd multiplier: a bijection of the counter, so ids never repeat
	return string(fleet.AppendULID(nil, ms<<16|(g.counter>>48)&0xffff, g.counter*0x9e3779b97f4a7c15))
}

func (g *latencyGen) rec(topic, key string, value []byte) *kgo.Record {
	k := []byte(key)
	return &kgo.Record{Topic: topic, Key: k, Value: value, Partition: contract.Partition(k, g.parts), Headers: []kgo.RecordHeader{
		{Key: contract.HeaderActorID, Value: []byte("SYSTEM::bench-harness")},
		{Key: contract.HeaderSourceType, Value: []byte(contract.SourceSystem)},
	}}
}

func (g *latencyGen) record(pid string, now time.Time) *kgo.Record {
	g.recSeq++
	v := fmt.Appendf(nil, `{"event_id":%q,"event_type":"platform.record","schema_version":1,"producer":"bench-latency-records","seq":%d,"occurred_at":%q,"correlation_id":"bench-latency","environment":"local_parity","payload":{"record_type":"app_instance","record_id":"rec-%s","record_version":1,"resource_family":"app_runtime","product_id":"app-platform","owning_domain":"app-platform","owning_package":"app-platform/runtime","domain_id":"dom-bench","tags":["domain:bench"],"provider":"app_runtime","provider_id":%q,"expected_state":"running","expected_version":"v1","deleted":false}}`,
		g.id(now), g.recSeq, now.UTC().Format("2006-01-02T15:04:05.000Z07:00"), pid, pid)
	return g.rec(g.names.PlatformRecords, contract.IdentityKey("app_runtime", pid), v)
}

func (g *latencyGen) observation(pid, state string, now time.Time) *kgo.Record {
	g.obsSeq++
	v := fmt.Appendf(nil, `{"event_id":%q,"event_type":"provider.observation","schema_version":1,"producer":"bench-latency-scanner","seq":%d,"occurred_at":%q,"correlation_id":"bench-latency","environment":"local_parity","payload":{"provider":"app_runtime","provider_id":%q,"resource_family":"app_runtime","observed_state":%q,"observed_version":"v1","owner_ref":"rec-%s"}}`,
		g.id(now), g.obsSeq, now.UTC().Format("2006-01-02T15:04:05.000Z07:00"), pid, state, pid)
	return g.rec(g.names.Observations, contract.IdentityKey("app_runtime", pid), v)
}
