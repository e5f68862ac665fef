// Command ingest is the ingest gateway's load client: it posts NDJSON
// batches (1,000 events each by default) over loopback and reports
// sustained events per second, request latency percentiles and resident
// memory over time. See README.md for the recorded figures and commands.
//
// Without -url it runs the whole path in this process: an in-process kfake
// broker, the gateway (pipeline/ingest, served by Gateway.Serve exactly as
// cmd/ingest serves it) and the client. The in-process broker keeps every
// record in memory, so the run trims the topics every few seconds
// (DeleteRecords) to keep the broker's memory flat too; the RSS reported is
// that of the whole process.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/service"
)

func main() {
	var (
		url         = flag.String("url", "", "gateway base URL to load; empty starts a broker and gateway in this process")
		apiKey      = flag.String("key", service.DefaultLocalAPIKey, "API key sent as bearer")
		duration    = flag.Duration("duration", 20*time.Second, "measured run length (10m for the memory-flatness run)")
		warmup      = flag.Duration("warmup", 3*time.Second, "unmeasured start")
		concurrency = flag.Int("concurrency", 8, "requests in flight")
		batch       = flag.Int("batch", 1000, "events per request")
		sample      = flag.Duration("sample", 5*time.Second, "progress and RSS sample interval")
		partitions  = flag.Int("partitions", 6, "partitions per topic of the in-process broker")
		linger      = flag.Duration("linger", ingest.DefaultLinger, "gateway producer linger (in-process gateway)")
		cpuProfile  = flag.String("cpuprofile", "", "write a CPU profile of the measured run here")
		memProfile  = flag.String("memprofile", "", "write an allocation profile here at the end")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	target := *url
	if target == "" {
		env, err := startInProcess(ctx, int32(*partitions), *linger, time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "start:", err)
			os.Exit(1)
		}
		defer env.close()
		target = env.url
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("load: %s, %d in flight, %d events/request, %s after %s warm-up\n", target, *concurrency, *batch, *duration, *warmup)
	res, err := runLoad(ctx, loadConfig{
		URL: target, APIKey: *apiKey, Duration: *duration, Warmup: *warmup, Concurrency: *concurrency,
		Batch: *batch, Sample: *sample, Environment: contract.EnvLocalParity, Out: os.Stdout,
	})
	printResult(os.Stdout, res)
	if *memProfile != "" {
		if f, err := os.Create(*memProfile); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func printResult(w io.Writer, r loadResult) {
	fmt.Fprintf(w, "\nevents: %d in %.1fs = %.0f events/s sustained (%d requests, %d answered 503 busy)\n",
		r.Events, r.Elapsed.Seconds(), r.EventsPerSec(), r.Requests, r.Busy)
	fmt.Fprintf(w, "request latency: p50 %s  p99 %s  max %s\n", r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond), r.Max.Round(time.Millisecond))
	if n := len(r.RSSMiB); n > 0 {
		lo, hi := r.RSSMiB[0], r.RSSMiB[0]
		for _, v := range r.RSSMiB {
			lo, hi = min(lo, v), max(hi, v)
		}
		fmt.Fprintf(w, "rss: first %.1f MiB, last %.1f MiB, min %.1f, max %.1f over %d samples\n", r.RSSMiB[0], r.RSSMiB[n-1], lo, hi, n)
	}
}

// inProcess is a broker and gateway running in this process.
type inProcess struct {
	url     string
	cluster *kfake.Cluster
	admCl   *kgo.Client
	cancel  context.CancelFunc
	served  chan error
	trimmed chan struct{}
}

func startInProcess(ctx context.Context, partitions int32, linger, trimEvery time.Duration) (*inProcess, error) {
	names := contract.DefaultTopics()
	all := []string{names.PlatformRecords, names.Observations, names.Telemetry, names.Usage, names.Rated, names.Ledger, names.Quarantine}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, all...))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	gw, err := ingest.New(ingest.Options{
		Environment: contract.EnvLocalParity, Brokers: cluster.ListenAddrs(), Topics: names,
		Keys: keys.LocalKeyring(service.DefaultLocalAPIKey), Linger: linger,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		cluster.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cluster.Close()
		return nil, err
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		cluster.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	e := &inProcess{url: "http://" + ln.Addr().String(), cluster: cluster, admCl: admCl, cancel: cancel, served: make(chan error, 1), trimmed: make(chan struct{})}
	go func() { e.served <- gw.Serve(sctx, ln, ingest.ServeOptions{}) }()
	go e.trim(sctx, kadm.NewClient(admCl), all, trimEvery)
	return e, nil
}

// trim deletes acknowledged records so the in-memory broker stays flat.
func (e *inProcess) trim(ctx context.Context, adm *kadm.Client, topicNames []string, every time.Duration) {
	defer close(e.trimmed)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ends, err := adm.ListEndOffsets(ctx, topicNames...)
		if err != nil {
			continue
		}
		_, _ = adm.DeleteRecords(ctx, ends.Offsets())
	}
}

func (e *inProcess) close() {
	e.cancel()
	<-e.served
	<-e.trimmed
	e.admCl.Close()
	e.cluster.Close()
}
