package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/driftline/driftline/pipeline/service"
)

// ServeOptions configure Server.Serve. DefaultServeOptions has the
// defaults; a zero field is passed to net/http as it is.
type ServeOptions struct {
	// Addr is the listen address. Default service.DefaultQueryAddr.
	Addr string
	// TLS, when set, serves HTTPS (service.ServerTLSConfig).
	TLS *tls.Config
	// WriteTimeout bounds writing one answer, exports included; Serve
	// raises it above the longest wait and query a request may make
	// (Options.MaxWait + Options.QueryTimeout + 10s). Lower frees
	// connections held by slow readers sooner, but cuts large exports.
	// Default 5m.
	WriteTimeout time.Duration
	// IdleTimeout is how long an idle keep-alive connection is kept.
	// Default 2m.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long in-flight requests may finish once ctx
	// ends before they are cut. Default 10s.
	ShutdownTimeout time.Duration
}

// DefaultServeOptions returns ServeOptions with the defaults written out.
func DefaultServeOptions() ServeOptions {
	return ServeOptions{Addr: service.DefaultQueryAddr, WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute,
		ShutdownTimeout: 10 * time.Second}
}

// Serve serves the API on so.Addr until ctx ends, then lets the requests
// in flight finish within so.ShutdownTimeout and closes the server
// (Close). Write and idle timeouts bound what a slow or idle client
// holds.
func (s *Server) Serve(ctx context.Context, so ServeOptions) error {
	wt := max(so.WriteTimeout, s.opts.MaxWait+s.opts.QueryTimeout+10*time.Second)
	hs := &http.Server{Addr: so.Addr, Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: wt, IdleTimeout: so.IdleTimeout, TLSConfig: so.TLS, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	if so.TLS != nil {
		go func() { errc <- hs.ListenAndServeTLS("", "") }()
	} else {
		go func() { errc <- hs.ListenAndServe() }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", so.Addr, err)
	case <-ctx.Done():
	}
	s.opts.Logger.Info("query api stopping")
	sctx, cancel := context.WithTimeout(context.Background(), so.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	s.Close()
	return nil
}
