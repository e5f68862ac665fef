package service

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Environment variables of the logging flags. A supervisor that sets them
// (the local stack) configures its children's logging without knowing
// their flags.
const (
	EnvLogLevel  = "DRIFTLINE_LOG_LEVEL"
	EnvLogFormat = "DRIFTLINE_LOG_FORMAT"
)

// Log formats of -log.format.
const (
	LogText = "text" // key=value lines, for a terminal or a log file read by eye
	LogJSON = "json" // one JSON object a line, for a log collector
)

// LogOptions are the logging settings every binary shares.
type LogOptions struct {
	// Level is the lowest level logged: debug, info, warn or error.
	// Default info.
	Level string
	// Format is LogText or LogJSON. Default LogText.
	Format string
}

// DefaultLogOptions returns the logging defaults, taken from
// DRIFTLINE_LOG_LEVEL and DRIFTLINE_LOG_FORMAT when set.
func DefaultLogOptions() LogOptions {
	return LogOptions{Level: Env(EnvLogLevel, "info"), Format: Env(EnvLogFormat, LogText)}
}

// LogFlags registers -log.level and -log.format on fs, with defaults from
// DefaultLogOptions, and returns the options they fill; pass them to
// SetupLogging after parsing.
func LogFlags(fs *flag.FlagSet) *LogOptions {
	o := DefaultLogOptions()
	fs.StringVar(&o.Level, "log.level", o.Level, "lowest level logged: debug, info, warn or error; debug is verbose on hot paths (env "+EnvLogLevel+")")
	fs.StringVar(&o.Format, "log.format", o.Format, "log format: text (key=value lines) or json (one object a line, for log collectors) (env "+EnvLogFormat+")")
	return &o
}

// SetupLogging builds the logger o describes, writing to w (normally
// os.Stderr), and makes it slog's default, which the standard log package
// then writes through too. A level or format it does not know is an
// error that names the flag.
func SetupLogging(o *LogOptions, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.Level)); err != nil {
		return nil, fmt.Errorf("-log.level %q: must be debug, info, warn or error", o.Level)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch o.Format {
	case LogText, "":
		h = slog.NewTextHandler(w, hopts)
	case LogJSON:
		h = slog.NewJSONHandler(w, hopts)
	default:
		return nil, fmt.Errorf("-log.format %q: must be %s or %s", o.Format, LogText, LogJSON)
	}
	log := slog.New(h)
	slog.SetDefault(log)
	return log, nil
}

// Env returns the settings as environment variables, for child processes
// to log as their parent does.
func (o *LogOptions) Env() []string {
	return []string{EnvLogLevel + "=" + o.Level, EnvLogFormat + "=" + o.Format}
}
