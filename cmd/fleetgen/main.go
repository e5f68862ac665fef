// Command fleetgen generates a synthetic fleet (package internal/fleet):
// it writes the event stream as NDJSON, or posts it to the ingest gateway,
// and writes the exact ground truth the pipeline must find.
//
//	fleetgen -o fleet.ndjson -truth truth.json
//	fleetgen -feed http://127.0.0.1:18080 -key "$KEY" -truth truth.json
//	fleetgen -pricebook units.json
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/service"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fleetgen:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := fleet.DefaultConfig()
	fs := flag.NewFlagSet("fleetgen", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	out := fs.String("o", "", "write the events as NDJSON to this file (\"-\" for stdout); the default when -feed is not given")
	feedURL := fs.String("feed", "", "post the events to the ingest gateway at this base URL (e.g. http://"+service.DefaultIngestAddr+")")
	key := fs.String("key", service.Env("DRIFTLINE_INGEST_KEY", service.DefaultLocalAPIKey), "API key for -feed (env DRIFTLINE_INGEST_KEY; the default is the local stack's)")
	batch := fs.Int("feed.batch", 1000, "NDJSON lines per ingest request; larger batches cost fewer requests but more gateway memory")
	truthPath := fs.String("truth", "", "write the ground truth as JSON to this file")
	priceBook := fs.String("pricebook", "", "write the price book the generator assumes as JSON to this file")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	g, err := fleet.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *priceBook != "" {
		raw, err := fleet.DefaultPriceBook().JSON()
		if err != nil {
			return fmt.Errorf("encode price book: %w", err)
		}
		if err := os.WriteFile(*priceBook, raw, 0o644); err != nil {
			return fmt.Errorf("write price book: %w", err)
		}
	}
	if *truthPath != "" {
		if err := writeTruth(*truthPath, g); err != nil {
			return err
		}
	}
	logf := func(format string, args ...any) {
		if !*quiet {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	start := time.Now()
	switch {
	case *feedURL != "":
		last := time.Now()
		st, err := fleet.Feed(ctx, *feedURL, *key, g, fleet.FeedOptions{BatchLines: *batch, Progress: func(s fleet.FeedStats) {
			if time.Since(last) >= time.Second {
				last = time.Now()
				logf("fed %d events in %d batches (accepted %d, duplicate %d, rejected %d, retries %d)", s.Events, s.Batches, s.Accepted, s.Duplicate, s.Rejected, s.Retries)
			}
		}})
		logf("fed %d events in %d batches in %v: accepted %d, duplicate %d, rejected %d, retries %d", st.Events, st.Batches, time.Since(start).Round(time.Millisecond), st.Accepted, st.Duplicate, st.Rejected, st.Retries)
		for _, r := range st.RejectedReceipts {
			logf("rejected: %s", r)
		}
		if err != nil {
			return err
		}
		if st.Rejected > 0 {
			return fmt.Errorf("the gateway rejected %d events; Possible solutions: check -fleet.env against the pipeline's environment and the key's allowed event types", st.Rejected)
		}
	default:
		n, err := writeEvents(ctx, *out, g, logf)
		if err != nil {
			return err
		}
		logf("wrote %d events in %v", n, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// writeEvents writes the stream as NDJSON to path ("" or "-": stdout).
func writeEvents(ctx context.Context, path string, g *fleet.Generator, logf func(string, ...any)) (int, error) {
	var w io.Writer = os.Stdout
	if path != "" && path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	n := 0
	err := g.Emit(func(e *fleet.Event) error {
		if n%100_000 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if n > 0 {
				logf("wrote %d events", n)
			}
		}
		n++
		bw.Write(e.Line)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return n, fmt.Errorf("write events: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("write events: %w", err)
	}
	if f, ok := w.(*os.File); ok && f != os.Stdout {
		if err := f.Close(); err != nil {
			return n, fmt.Errorf("write events: %w", err)
		}
	}
	return n, nil
}

// writeTruth writes the ground truth, with the config it belongs to.
func writeTruth(path string, g *fleet.Generator) error {
	doc := struct {
		Config fleet.Config `json:"config"`
		*fleet.Truth
	}{g.Config(), g.Truth()}
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encode truth: %w", err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	return nil
}
