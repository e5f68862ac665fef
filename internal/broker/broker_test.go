package broker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestLoopbackOnly(t *testing.T) {
	f := func(addr, wantHost, wantErr string) {
		t.Helper()
		host, _, err := loopback(addr)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("%q: err %v, want %q", addr, err, wantErr)
			}
			return
		}
		if err != nil || host != wantHost {
			t.Fatalf("%q: %q, %v; want %q", addr, host, err, wantHost)
		}
	}
	f("127.0.0.1:0", "127.0.0.1", "")
	f("localhost:9092", "127.0.0.1", "")
	f("[::1]:9092", "::1", "")
	f(":9092", "", "listen on every interface")
	f("0.0.0.0:9092", "", "loopback only")
	f("10.0.0.1:9092", "", "loopback only")
	f("127.0.0.1:http", "", "bad port")
}

// TestRestartKeepsTopicsAndRecords: the topics created at start and a
// produced record are there after a restart on the same data directory.
func TestRestartKeepsTopicsAndRecords(t *testing.T) {
	opts := DefaultOptions()
	opts.Addr = "127.0.0.1:0"
	opts.DataDir = t.TempDir()
	opts.Partitions = 2
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	b, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	names := contract.DefaultTopics()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: names.PlatformRecords, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	opts.CreateTopics = false
	b, err = Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := topics.CheckCopartitioned(ctx, kadm.NewClient(cl), names); err != nil {
		t.Fatalf("topics after restart: %v", err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, names.PlatformRecords)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	if n != 1 {
		t.Fatalf("%d records in %s after restart, want 1", n, names.PlatformRecords)
	}
}

func TestOptionsRefused(t *testing.T) {
	opts := DefaultOptions()
	opts.DataDir = t.TempDir()
	for _, c := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Partitions = 0 }, "-kafka.partitions"},
		{func(o *Options) { o.LogLevel = "loud" }, "-broker.logLevel"},
		{func(o *Options) { o.Addr = "192.0.2.1:9092" }, "loopback only"},
	} {
		o := opts
		c.mod(&o)
		if _, err := Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %s, got %v", c.want, err)
		}
	}
}

// TestLogger: the broker's lines at or above its level reach slog at the
// matching slog level.
func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := &logger{level: kfake.LogLevelWarn, log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Logf(kfake.LogLevelError, "persist: %v", "disk full")
	l.Logf(kfake.LogLevelWarn, "request failed")
	l.Logf(kfake.LogLevelInfo, "every request")
	want := "level=ERROR msg=\"broker: persist: disk full\"\nlevel=WARN msg=\"broker: request failed\"\n"
	var got strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if i := strings.Index(line, "level="); i >= 0 {
			got.WriteString(line[i:])
		}
	}
	if got.String() != want {
		t.Fatalf("logged\n%s\nwant\n%s", got.String(), want)
	}
}
