// Command rater will rate usage.events against the versioned usage-unit
// price book and write billing.rated exactly once (CONTRACT sections 3.5,
// 3.7 and 5).
//
// PLACEHOLDER: rating is not implemented yet. The process starts, serves
// /healthz and /metrics so the local stack is complete, and consumes
// nothing; no usage is rated and no billing finding is raised.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/driftline/driftline/pipeline/config"
)

func main() {
	fs := flag.CommandLine
	common := config.RegisterFlags(fs)
	addr := fs.String("rater.addr", config.Env("DRIFTLINE_RATER_ADDR", config.DefaultRaterAddr), "HTTP listen address for /metrics and /healthz (env DRIFTLINE_RATER_ADDR)")
	flag.Parse()
	if err := common.Validate(); err != nil {
		slog.Error("rater: " + err.Error())
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok (placeholder: rating not implemented)")
	})
	hs := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("rater: http server failed", "err", err)
			stop()
		}
	}()
	slog.Warn("rater is a placeholder: usage is not rated yet", "http", *addr)
	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdownCtx)
}
