package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/ingest"
)

// loadConfig says how hard and how long to push.
type loadConfig struct {
	URL         string        // gateway base URL
	APIKey      string        // bearer key
	Duration    time.Duration // measured run, after Warmup
	Warmup      time.Duration // unmeasured start
	Concurrency int           // requests in flight
	Batch       int           // events per request
	Sample      time.Duration // progress line and RSS sample interval
	Environment string        // envelope environment
	Out         io.Writer     // progress and report
}

// loadResult is what a run measured.
type loadResult struct {
	Events, Requests, Busy, Failed int64
	Elapsed                        time.Duration
	P50, P99, Max                  time.Duration
	RSSMiB                         []float64 // one sample per Sample interval
}

func (r loadResult) EventsPerSec() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// idWidth is the width of the counter patched into each event id, so a
// batch is encoded once and only its ids change between requests.
const idWidth = 12

// batchTemplate is one request body with the offsets of its id counters.
type batchTemplate struct {
	body []byte
	ids  []int // offset of each idWidth-digit counter in body
}

// newBatch encodes n events of a realistic mix (observations, heartbeats,
// usage, records) for worker w.
func newBatch(w, n int, environment string) *batchTemplate {
	var b bytes.Buffer
	t := &batchTemplate{}
	zeros := strings.Repeat("0", idWidth)
	for i := range n {
		node := fmt.Sprintf("node-%d-%d", w, i%500)
		id := func() {
			fmt.Fprintf(&b, `"event_id":"w%d-`, w)
			t.ids = append(t.ids, b.Len())
			b.WriteString(zeros + `",`)
		}
		b.WriteString("{")
		id()
		switch i % 10 {
		case 0:
			fmt.Fprintf(&b, `"event_type":"nodeagent.heartbeat","schema_version":1,"producer":"agent-%d","occurred_at":"2026-11-21T10:15:30.123Z","environment":%q,"payload":{"node_id":%q,"agent_version":"1.4.2","cert_issuer_fingerprint":"sha256:ab12","ingress_trust_fingerprint":"sha256:cd34","host_fingerprint":"hf-%d","update_path":"none","terminal_stream_probe":"passed","workload_impact":"none_observed","health":"OK","rtt_ms":12.5,"loss_pct":0.1,"bandwidth_kbps":90000,"backlog_messages":0,"seconds_behind":0,"replay_required":false}}`,
				w, environment, node, i)
		case 1:
			fmt.Fprintf(&b, `"event_type":"usage.recorded","schema_version":1,"producer":"gw-%d","occurred_at":"2026-11-21T10:15:30.123Z","environment":%q,"payload":{"usage_id":"u-%d-%d","metering_source":"gateway","metering_id":"m-%d-%d","unit_id":"gpu_hour","quantity":"1.500000","product_id":"p1","tenant_id":"t1","project_id":"pr1","window_start":"2026-11-21T10:00:00Z","window_end":"2026-11-21T10:15:00Z"}}`,
				w, environment, w, i, w, i)
		case 2:
			fmt.Fprintf(&b, `"event_type":"platform.record","schema_version":1,"producer":"platform","occurred_at":"2026-11-21T10:15:30.123Z","environment":%q,"payload":{"record_type":"node","record_id":"rec-%s","record_version":3,"resource_family":"gpuaas_allocation","product_id":"p1","owning_domain":"compute","owning_package":"gpuaas","domain_id":"d1","tags":["eu1","a100"],"provider":"maas","provider_id":%q,"expected_state":"active","expected_version":"v7","deleted":false}}`,
				environment, node, node)
		default:
			fmt.Fprintf(&b, `"event_type":"provider.observation","schema_version":1,"producer":"scanner-%d","occurred_at":"2026-11-21T10:15:30.123Z","correlation_id":"scan-1","environment":%q,"payload":{"provider":"maas","provider_id":%q,"resource_family":"gpuaas_allocation","observed_state":"active","observed_version":"v7","usage":"12.500000"}}`,
				w, environment, node)
		}
		b.WriteByte('\n')
	}
	t.body = b.Bytes()
	return t
}

// stamp writes counter values next, next+1, ... into the template's ids.
func (t *batchTemplate) stamp(next uint64) {
	var buf [20]byte
	for i, off := range t.ids {
		d := strconv.AppendUint(buf[:0], next+uint64(i), 10)
		dst := t.body[off : off+idWidth]
		for j := range dst {
			dst[j] = '0'
		}
		copy(dst[idWidth-len(d):], d)
	}
}

// runLoad posts batches until cfg.Warmup+cfg.Duration has passed and
// reports the measured part.
func runLoad(ctx context.Context, cfg loadConfig) (loadResult, error) {
	tr := &http.Transport{
		MaxIdleConns: cfg.Concurrency, MaxIdleConnsPerHost: cfg.Concurrency,
		DialContext:        (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	url := strings.TrimRight(cfg.URL, "/") + ingest.EventsPath

	var (
		measuring    atomic.Bool
		events, reqs atomic.Int64
		busy, failed atomic.Int64
		latMu        sync.Mutex // latMu protects lats
		lats         []time.Duration
		firstErr     atomic.Value
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := newBatch(w, cfg.Batch, cfg.Environment)
			var mine []time.Duration
			defer func() { latMu.Lock(); lats = append(lats, mine...); latMu.Unlock() }()
			var next uint64 = 1
			for ctx.Err() == nil {
				t.stamp(next)
				next += uint64(cfg.Batch)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(t.body))
				req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
				req.Header.Set("Content-Type", "application/x-ndjson")
				start := time.Now()
				res, err := hc.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
					continue
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				lat := time.Since(start)
				switch res.StatusCode {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					busy.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				default:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("HTTP %d: %s", res.StatusCode, body))
					continue
				}
				var r struct {
					Accepted int `json:"accepted"`
				}
				if err := json.Unmarshal(body, &r); err != nil || r.Accepted != cfg.Batch {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("answer accepted %d of %d: %v", r.Accepted, cfg.Batch, err))
					continue
				}
				if measuring.Load() {
					events.Add(int64(r.Accepted))
					reqs.Add(1)
					mine = append(mine, lat)
				}
			}
		}()
	}

	var res loadResult
	select {
	case <-time.After(cfg.Warmup):
	case <-ctx.Done():
	}
	measuring.Store(true)
	start := time.Now()
	tick := time.NewTicker(cfg.Sample)
	deadline := time.NewTimer(cfg.Duration)
	var lastEvents int64
	lastAt := start
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline.C:
			break loop
		case now := <-tick.C:
			ev := events.Load()
			rss := rssMiB()
			res.RSSMiB = append(res.RSSMiB, rss)
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Fprintf(cfg.Out, "t=%5.0fs  events/s=%8.0f  rss=%6.1f MiB  heap_inuse=%6.1f MiB  busy=%d failed=%d\n",
				now.Sub(start).Seconds(), float64(ev-lastEvents)/now.Sub(lastAt).Seconds(), rss, float64(ms.HeapInuse)/(1<<20), busy.Load(), failed.Load())
			lastEvents, lastAt = ev, now
		}
	}
	res.Elapsed = time.Since(start)
	measuring.Store(false)
	tick.Stop()
	cancel()
	wg.Wait()
	res.Events, res.Requests, res.Busy, res.Failed = events.Load(), reqs.Load(), busy.Load(), failed.Load()
	slices.Sort(lats)
	if n := len(lats); n > 0 {
		res.P50, res.P99, res.Max = lats[n/2], lats[min(n-1, n*99/100)], lats[n-1]
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return res, fmt.Errorf("%d failed requests, first: %w", res.Failed, err)
	}
	if res.Requests == 0 {
		return res, errors.New("no request completed")
	}
	return res, nil
}

// rssMiB returns this process's resident set size.
func rssMiB() float64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseFloat(f[1], 64)
	return pages * float64(os.Getpagesize()) / (1 << 20)
}
