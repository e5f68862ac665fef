// Package stage is the wiring the binary of a stream stage (cmd/joiner,
// cmd/rater) shares with the others: the shared and logging flags of
// package service, -<name>.addr of the ops endpoints, the flags of its
// stream.StageOptions and stream.RoundOptions, the metrics registry, and
// the stop signals.
package stage

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream"
)

// Stage is the wiring of one stage binary.
type Stage struct {
	// Name names the process in its logs and errors ("joiner").
	Name string
	// Common holds the shared settings, once Start has parsed the flags.
	Common *service.Common
	// Registry receives the process's metrics.
	Registry *prometheus.Registry
	// Addr is the listen address of the ops endpoints.
	Addr string

	fs         *flag.FlagSet
	log        *service.LogOptions
	cpuProfile string
	// parsed complete options from the flags once they are parsed.
	parsed      []func()
	stop        context.CancelFunc
	stopProfile func() error
}

// New registers the shared flags, the logging flags and
// -<name>.addr (default from the environment variable addrEnv, else
// addr) on the command line.
func New(name, addrEnv, addr string) *Stage {
	s := &Stage{Name: name, Registry: service.NewRegistry(), fs: flag.CommandLine}
	s.Common = service.RegisterFlags(s.fs)
	s.log = service.LogFlags(s.fs)
	s.fs.StringVar(&s.Addr, name+".addr", service.Env(addrEnv, addr), "HTTP listen address for /metrics and /healthz (env "+addrEnv+")")
	return s
}

// CPUProfileFlag registers -cpuprofile: Start profiles the whole run into
// the file it names.
func (s *Stage) CPUProfileFlag() {
	s.fs.StringVar(&s.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
}

// StageFlags registers -<prefix>.group; once the flags are parsed, o
// takes the brokers, topics and environment of the shared flags, the
// client options their -kafka.tls.* and -kafka.sasl.* flags say, and the
// Registry. plural names the stage's processes in the help.
func (s *Stage) StageFlags(prefix, plural string, o *stream.StageOptions) {
	s.fs.StringVar(&o.Group, prefix+".group", o.Group, "consumer group shared by all "+plural+"; every member owns a share of the partitions")
	s.parsed = append(s.parsed, func() {
		o.Brokers, o.Topics, o.Environment = s.Common.SeedBrokers(), s.Common.Topics, s.Common.Environment
		o.ClientOpts = append(o.ClientOpts, s.Common.KafkaOpts()...)
		o.Registerer = s.Registry
	})
}

// RoundFlags registers the flags of o under prefix; who names the stage
// in the help. A -<prefix>.catchUpInterval of zero or less turns catching
// up off (where the zero option is the default).
func (s *Stage) RoundFlags(prefix, who string, o *stream.RoundOptions) {
	fs, p := s.fs, prefix+"."
	fs.DurationVar(&o.FlushInterval, p+"flushInterval", o.FlushInterval, "longest time processed events wait before their rows are written and offsets committed; larger batches are cheaper for ClickHouse but rows appear later")
	fs.IntVar(&o.FlushEvents, p+"flushEvents", o.FlushEvents, "flush after this many events; bounds memory held between commits")
	fs.DurationVar(&o.CatchUpInterval, p+"catchUpInterval", o.CatchUpInterval, "longest round while the "+who+" is behind by more than -"+p+"flushEvents records (a restart after downtime, a new group): fewer, larger ClickHouse writes while it catches up; not above -"+p+"flushInterval turns it off")
	fs.IntVar(&o.CatchUpEvents, p+"catchUpEvents", o.CatchUpEvents, "flush a catch-up round after this many events; bounds memory held between commits while catching up")
	fs.IntVar(&o.QueueRecords, p+"queueRecords", o.QueueRecords, "records of one topic partition that may wait in the "+who+"'s merge for an earlier stream before its fetching pauses (bounds memory while one topic runs ahead, and leaves the fetches to the stream waited for)")
	fs.DurationVar(&o.LiveHold, p+"liveHold", o.LiveHold, "how long the "+who+"'s merge of a partition holds other streams' records while a stream is caught up and empty, for a record with an earlier timestamp still in flight to the broker; up to this much more latency on partitions where a stream is idle (once per idle spell; records older than it are not held), and above the longest time a producer holds a timestamped record before the broker has it (its retries across a broker restart) the live result equals a replay's; 0 applies such a record late instead (counted)")
	s.parsed = append(s.parsed, func() {
		if o.CatchUpInterval <= 0 {
			o.CatchUpInterval = -1
		}
	})
}

// Start parses the command line, sets up logging, checks the shared
// settings, starts the CPU profile if asked, and returns a context that
// ends on SIGINT or SIGTERM. Close undoes it.
func (s *Stage) Start() (context.Context, error) {
	if err := s.fs.Parse(os.Args[1:]); err != nil {
		return nil, err
	}
	if _, err := service.SetupLogging(s.log, os.Stderr); err != nil {
		return nil, err
	}
	if err := s.Common.Validate(); err != nil {
		return nil, err
	}
	for _, f := range s.parsed {
		f()
	}
	if s.cpuProfile != "" {
		stop, err := service.StartCPUProfile(s.cpuProfile)
		if err != nil {
			return nil, err
		}
		s.stopProfile = stop
	}
	ctx, stop := service.SignalContext()
	s.stop = stop
	return ctx, nil
}

// Stop ends the context of Start, as a stop signal does.
func (s *Stage) Stop() {
	if s.stop != nil {
		s.stop()
	}
}

// Close stops listening for the signals and ends the CPU profile.
func (s *Stage) Close() {
	s.Stop()
	if s.stopProfile != nil {
		if err := s.stopProfile(); err != nil {
			slog.Error(s.Name + ": " + err.Error())
		}
	}
}

// Serve serves the ops endpoints on Addr with health as /healthz; a
// failed listener stops the process (Stop).
func (s *Stage) Serve(health http.HandlerFunc) *service.Server {
	return service.Serve(s.Addr, s.Registry, health, func(error) { s.Stop() })
}

// Starting returns err of a step of starting, or nil when the process
// was told to stop meanwhile: a supervisor may stop a process that has
// only just been started, and that is a clean stop, not a failure.
func (s *Stage) Starting(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		slog.Info(s.Name+": stopped while starting", "err", err)
		return nil
	}
	return err
}
