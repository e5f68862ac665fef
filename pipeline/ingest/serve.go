package ingest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeOptions configure Gateway.Serve.
type ServeOptions struct {
	// TLS, when set, serves HTTPS. In client certificate mode
	// (Options.ClientCertAuth) it is required and must require and verify
	// client certificates; see service.ServerTLSConfig.
	TLS *tls.Config

	// ShutdownTimeout bounds the drain after ctx ends: finishing admitted
	// requests and flushing the producer. Default 30s; keep it above
	// Options.ProduceTimeout so a request that has started writing can
	// finish.
	ShutdownTimeout time.Duration

	// ReadTimeout bounds reading one request, body included; a slow
	// sender cannot hold an in-flight slot longer. Default 1m.
	ReadTimeout time.Duration

	// OnListening, when set, is called once the server accepts
	// connections.
	OnListening func(addr net.Addr)
}

// Defaults of ServeOptions.
const (
	DefaultShutdownTimeout = 30 * time.Second
	DefaultReadTimeout     = time.Minute
)

// DefaultServeOptions returns ServeOptions with the defaults written out.
func DefaultServeOptions() ServeOptions {
	return ServeOptions{ShutdownTimeout: DefaultShutdownTimeout, ReadTimeout: DefaultReadTimeout}
}

// Serve serves the gateway on ln until ctx ends, then shuts down in steps:
// refuse new requests (503 shutting_down, /healthz 503) and stop
// accepting connections; let admitted requests finish and answer, within
// ShutdownTimeout; flush the producer; close it. Every 200 answered was
// acknowledged by the broker before it was sent, and a request cut off by
// the deadline is never answered 200, so its caller retries. Serve closes
// the gateway before it returns.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener, so ServeOptions) error {
	if so.ShutdownTimeout <= 0 {
		so.ShutdownTimeout = DefaultShutdownTimeout
	}
	if so.ReadTimeout <= 0 {
		so.ReadTimeout = DefaultReadTimeout
	}
	if g.opts.ClientCertAuth && (so.TLS == nil || so.TLS.ClientAuth != tls.RequireAndVerifyClientCert || so.TLS.ClientCAs == nil) {
		_ = g.Close(context.Background())
		return ErrTLSConfig
	}
	srv := &http.Server{
		Handler:           g.Handler(),
		TLSConfig:         so.TLS,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       so.ReadTimeout,
		WriteTimeout:      g.opts.ProduceTimeout + ackGrace + time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn), // TLS handshake failures and the like
	}
	if so.TLS != nil {
		ln = tls.NewListener(ln, so.TLS)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if so.OnListening != nil {
		so.OnListening(ln.Addr())
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		_ = g.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	}
	g.log.Info("shutting down: refusing new requests, finishing admitted ones", "timeout", so.ShutdownTimeout)
	g.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), so.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := srv.Shutdown(sctx); err != nil {
		// Deadline: cut the remaining connections. Their handlers still
		// finish their writes (Close waits for them below) but cannot
		// answer, so their callers retry and get "duplicate".
		_ = srv.Close()
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := g.Close(sctx); err != nil {
		errs = append(errs, err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	if len(errs) == 0 {
		g.log.Info("ingest gateway stopped cleanly")
	}
	return errors.Join(errs...)
}
