// Command fleetgen generates a synthetic fleet (package internal/fleet):
// it writes the event stream as NDJSON, or posts it to the ingest gateway,
// and writes the exact ground truth the pipeline must find.
//
//	fleetgen -o fleet.ndjson -truth truth.json
//	fleetgen -feed http://127.0.0.1:18080 -key "$KEY" -truth truth.json
//	fleetgen -pricebook units.json
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/service"
)

func main() { service.Main("fleetgen", run) }

func run() error {
	cfg, feedOpts := fleet.DefaultConfig(), fleet.DefaultFeedOptions()
	fs := flag.NewFlagSet("fleetgen", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	logOpts := service.LogFlags(fs)
	out := fs.String("o", "", "write the events as NDJSON to this file (\"-\" for stdout); the default when -feed is not given")
	feedURL := fs.String("feed", "", "post the events to the ingest gateway at this base URL (e.g. http://"+service.DefaultIngestAddr+")")
	key := fs.String("key", service.Env("DRIFTLINE_INGEST_KEY", service.DefaultLocalAPIKey), "API key for -feed (env DRIFTLINE_INGEST_KEY; the default is the local stack's)")
	fs.IntVar(&feedOpts.BatchLines, "feed.batch", feedOpts.BatchLines, "NDJSON lines per ingest request; larger batches cost fewer requests but more gateway memory")
	truthPath := fs.String("truth", "", "write the ground truth as JSON to this file")
	priceBook := fs.String("pricebook", "", "write the price book the generator assumes as JSON to this file")
	quiet := fs.Bool("quiet", false, "no progress lines (as -log.level=warn)")
	_ = fs.Parse(os.Args[1:])
	if *quiet {
		logOpts.Level = "warn"
	}
	log, err := service.SetupLogging(logOpts, os.Stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	g, err := fleet.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := service.SignalContext()
	defer stop()

	if *priceBook != "" {
		if err := fleet.WritePriceBookFile(*priceBook); err != nil {
			return err
		}
	}
	if *truthPath != "" {
		if err := fleet.WriteTruthFile(*truthPath, g); err != nil {
			return err
		}
	}
	start := time.Now()
	if *feedURL == "" {
		n, err := fleet.WriteNDJSONFile(ctx, *out, g, func(n int) { log.Info("writing events", "events", n) })
		if err != nil {
			return err
		}
		log.Info("wrote events", "events", n, "took", time.Since(start).Round(time.Millisecond))
		return nil
	}

	last := time.Now()
	feedOpts.Progress = func(s fleet.FeedStats) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			log.Info("feeding", "events", s.Events, "batches", s.Batches, "accepted", s.Accepted, "duplicate", s.Duplicate, "rejected", s.Rejected, "retries", s.Retries)
		}
	}
	st, err := fleet.Feed(ctx, *feedURL, *key, g, feedOpts)
	log.Info("fed events", "events", st.Events, "batches", st.Batches, "took", time.Since(start).Round(time.Millisecond),
		"accepted", st.Accepted, "duplicate", st.Duplicate, "rejected", st.Rejected, "retries", st.Retries)
	for _, r := range st.RejectedReceipts {
		log.Warn("rejected", "receipt", string(r))
	}
	if err != nil {
		return err
	}
	if st.Rejected > 0 {
		return fmt.Errorf("the gateway rejected %d events; Possible solutions: check -fleet.env against the pipeline's environment and the key's allowed event types", st.Rejected)
	}
	return nil
}
