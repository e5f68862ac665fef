package service

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main runs run and exits 1 with its error logged, prefixed by name, when
// it fails.
func Main(name string, run func() error) {
	if err := run(); err != nil {
		slog.Error(name + ": " + err.Error())
		os.Exit(1)
	}
}

// SignalContext returns a context that ends on SIGINT or SIGTERM, the
// signals that stop a Driftline process cleanly; stop releases it.
func SignalContext() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Hangup returns a channel that receives SIGHUP, the signal on which a
// Driftline process rereads a file it watches (keys file, price book) at
// once; stop releases it.
func Hangup() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}
