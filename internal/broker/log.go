package broker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// logger passes kfake's lines at or above level to slog, so the broker
// logs in the format and to the place every other binary does.
type logger struct {
	level kfake.LogLevel
	log   *slog.Logger
}

func (l *logger) Logf(level kfake.LogLevel, format string, args ...any) {
	if level > l.level {
		return
	}
	sl := slog.LevelDebug
	switch level {
	case kfake.LogLevelError:
		sl = slog.LevelError
	case kfake.LogLevelWarn:
		sl = slog.LevelWarn
	case kfake.LogLevelInfo:
		sl = slog.LevelInfo
	}
	l.log.Log(context.Background(), sl, "broker: "+fmt.Sprintf(format, args...))
}

func parseLevel(s string) (kfake.LogLevel, error) {
	switch strings.ToLower(s) {
	case "none":
		return kfake.LogLevelNone, nil
	case "error":
		return kfake.LogLevelError, nil
	case "warn", "":
		return kfake.LogLevelWarn, nil
	case "info":
		return kfake.LogLevelInfo, nil
	case "debug":
		return kfake.LogLevelDebug, nil
	}
	return 0, fmt.Errorf("-broker.logLevel %q: must be none, error, warn, info or debug", s)
}
