package service

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"strings"
	"testing"
)

func TestSetupLogging(t *testing.T) {
	defer func(l *slog.Logger) { slog.SetDefault(l) }(slog.Default())
	f := func(args []string, wantErr string, check func(out string)) {
		t.Helper()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o := LogFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err := SetupLogging(o, &buf)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("%v: err %v, want %q", args, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		slog.Debug("hidden unless debug")
		slog.Info("shown", "k", 1)
		check(buf.String())
	}
	f(nil, "", func(out string) {
		if !strings.Contains(out, "level=INFO msg=shown k=1") || strings.Contains(out, "hidden") {
			t.Fatalf("default text at info: %q", out)
		}
	})
	f([]string{"-log.level=debug", "-log.format=json"}, "", func(out string) {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var m map[string]any
		if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &m) != nil || m["msg"] != "shown" {
			t.Fatalf("json at debug: %q", out)
		}
	})
	f([]string{"-log.level=loud"}, "-log.level", nil)
	f([]string{"-log.format=xml"}, "-log.format", nil)
}

func TestLogFlagsFromEnvironment(t *testing.T) {
	t.Setenv(EnvLogLevel, "warn")
	t.Setenv(EnvLogFormat, LogJSON)
	o := LogFlags(flag.NewFlagSet("test", flag.ContinueOnError))
	if o.Level != "warn" || o.Format != LogJSON {
		t.Fatalf("from the environment: %+v", o)
	}
	if got := strings.Join(o.Env(), " "); got != "DRIFTLINE_LOG_LEVEL=warn DRIFTLINE_LOG_FORMAT=json" {
		t.Fatalf("Env() = %q", got)
	}
}
