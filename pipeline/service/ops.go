// The operational endpoints every Driftline process that has no HTTP API
// of its own exposes: Prometheus /metrics and a /healthz answered by the
// process's own health check, and the Go profiler under /debug/pprof/ (the
// address is loopback by default).

package service

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime and process
// collectors, for the process's own metrics to join.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Server serves /metrics from reg and /healthz from health on addr.
type Server struct {
	hs *http.Server
}

// Serve starts serving in the background. failed is called if the
// listener fails (the address is taken, say), so the process can stop
// rather than run blind.
func Serve(addr string, reg *prometheus.Registry, health http.HandlerFunc, failed func(error)) *Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", health)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s := &Server{hs: &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("ops: http server failed", "addr", addr, "err", err)
			failed(err)
		}
	}()
	return s
}

// Shutdown stops the server, letting requests in flight finish for up to
// five seconds.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.hs.Shutdown(ctx)
}
