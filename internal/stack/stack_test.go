package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
)

// The test binary doubles as a fake pipeline service: run under a service's
// name (a symlink in a bin dir), it serves /healthz on that service's
// DRIFTLINE_*_ADDR, records its SIGTERM in $FAKE_RECORD and exits; GET /exit
// makes it exit with status 3, as a crash would.
func TestMain(m *testing.M) {
	if name := filepath.Base(os.Args[0]); isService(name) {
		os.Exit(fakeService(name))
	}
	if dir := os.Getenv("FAKE_SUPERVISOR_DIR"); dir != "" {
		os.Exit(fakeSupervisor(dir))
	}
	code := m.Run()
	if brokerDir != "" {
		os.RemoveAll(brokerDir)
	}
	os.Exit(code)
}

func isService(name string) bool {
	for _, s := range DefaultServices {
		if s == name {
			return true
		}
	}
	return false
}

func fakeService(name string) int {
	addr := os.Getenv("DRIFTLINE_" + strings.ToUpper(name) + "_ADDR")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	crash := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/exit", func(w http.ResponseWriter, _ *http.Request) { close(crash) })
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Println(name, "listening on", addr)
	select {
	case <-sig:
	case <-crash:
		return 3
	}
	// Stopping takes a moment, so an out-of-order stop would interleave.
	time.Sleep(50 * time.Millisecond)
	f, err := os.OpenFile(os.Getenv("FAKE_RECORD"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 1
	}
	fmt.Fprintln(f, name)
	f.Close()
	return 0
}

// fakeSupervisor runs a supervisor of fake services in dir until SIGTERM,
// as `stack up -detach` would.
func fakeSupervisor(dir string) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	s, err := newStack(Options{
		Dir:       dir,
		BinDir:    os.Getenv("FAKE_BIN"),
		FreePorts: true,
		Env:       []string{"FAKE_RECORD=" + os.Getenv("FAKE_RECORD")},
		Log:       os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	for _, svc := range s.opts.Services {
		if err := s.startService(ctx, svc); err != nil {
			fmt.Fprintln(os.Stderr, err)
			_ = s.Stop(ctx)
			return 1
		}
	}
	s.mu.Lock()
	s.state.Status = StatusReady
	_ = writeState(dir, s.state)
	s.mu.Unlock()
	<-sig
	if err := s.Stop(ctx); err != nil {
		return 1
	}
	return 0
}

// fakeBinDir links every service name to the test binary.
func fakeBinDir(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range DefaultServices {
		if err := os.Symlink(exe, filepath.Join(dir, s)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeStackOptions are testOptions for fake services next to the real
// broker; the fakes record their SIGTERMs in the file record.
func fakeStackOptions(t *testing.T) (opts Options, record string) {
	t.Helper()
	binDir := fakeBinDir(t)
	if err := os.Symlink(filepath.Join(buildBroker(t), NameBroker), filepath.Join(binDir, NameBroker)); err != nil {
		t.Fatal(err)
	}
	opts = testOptions(t, binDir)
	record = filepath.Join(opts.Dir, "stops")
	opts.Env = []string{"FAKE_RECORD=" + record}
	return opts, record
}

var (
	brokerOnce sync.Once
	brokerDir  string
	brokerErr  error
)

// buildBroker builds cmd/broker once per test binary run.
func buildBroker(t *testing.T) string {
	t.Helper()
	brokerOnce.Do(func() {
		brokerDir, brokerErr = os.MkdirTemp("", "driftline-broker-bin")
		if brokerErr != nil {
			return
		}
		brokerErr = Build(context.Background(), brokerDir, NameBroker)
	})
	if brokerErr != nil {
		t.Fatal(brokerErr)
	}
	return brokerDir
}

func testOptions(t *testing.T, binDir string) Options {
	t.Helper()
	var log bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("supervisor log:\n%s", log.String())
		}
	})
	return Options{
		Dir:          t.TempDir(),
		BinDir:       binDir,
		FreePorts:    true,
		Partitions:   3,
		Log:          &syncWriter{w: &log},
		StartTimeout: 30 * time.Second,
		StopTimeout:  10 * time.Second,
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestBrokerPersistence produces to the broker binary, restarts it on the
// same data dir and reads the record and the committed offset back.
func TestBrokerPersistence(t *testing.T) {
	binDir := buildBroker(t)
	opts := testOptions(t, binDir)
	opts.Services = []string{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := func() *Stack {
		t.Helper()
		s, err := newStack(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.startBroker(ctx); err != nil {
			_ = s.Stop(ctx)
			t.Fatal(err)
		}
		opts = s.Options() // keep the ports chosen the first time
		return s
	}

	s := start()
	rec := produceProbe(t, ctx, s.BrokerAddr())
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.BrokerAddr()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: rec.Topic, Partition: rec.Partition, At: rec.Offset + 1})
	if err := adm.CommitAllOffsets(ctx, "persist-test", offsets); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cl.Close()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}

	s = start()
	defer s.Stop(ctx)
	cl, err = kgo.NewClient(kgo.SeedBrokers(s.BrokerAddr()),
		kgo.ConsumeTopics(contract.TopicPlatformRecords),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	var got []*kgo.Record
	for len(got) == 0 && fctx.Err() == nil {
		fs := cl.PollFetches(fctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	if len(got) != 1 || string(got[0].Key) != "maas/node-1" || string(got[0].Value) != `{"event_id":"e1"}` ||
		got[0].Partition != rec.Partition || got[0].Offset != rec.Offset {
		t.Fatalf("after restart read %v, want the one record produced before (partition %d offset %d)", got, rec.Partition, rec.Offset)
	}
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, "persist-test")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	if o, ok := fetched.Lookup(rec.Topic, rec.Partition); !ok || o.At != rec.Offset+1 {
		t.Fatalf("committed offset after restart = %+v (found %v), want %d", o, ok, rec.Offset+1)
	}
}

// TestStartStopOrder starts the broker and fake services, crashes one to
// see it reported, and checks that Stop goes in reverse start order.
func TestStartStopOrder(t *testing.T) {
	opts, record := fakeStackOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s, err := newStack(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.startBroker(ctx); err != nil {
		t.Fatal(err)
	}
	for _, svc := range s.opts.Services {
		if err := s.startService(ctx, svc); err != nil {
			_ = s.Stop(ctx)
			t.Fatal(err)
		}
	}

	st, running, err := ReadState(s.Dir())
	if err != nil || !running {
		t.Fatalf("ReadState = running %v, %v; want the running supervisor", running, err)
	}
	var names []string
	for _, c := range st.Children {
		names = append(names, c.Name)
		if !alive(c.Pid) {
			t.Errorf("child %s pid %d not alive", c.Name, c.Pid)
		}
	}
	if want := "broker,ingest,joiner,rater,query"; strings.Join(names, ",") != want {
		t.Fatalf("children %v, want %s", names, want)
	}
	if _, err := newStack(opts); !errors.Is(err, ErrRunning) {
		t.Fatalf("second supervisor on the same dir: %v, want ErrRunning", err)
	}

	// A crash of the rater is reported, not restarted.
	resp, err := http.Get(s.RaterURL() + "/exit")
	if err == nil {
		resp.Body.Close()
	}
	select {
	case e := <-s.Exited():
		if e.Name != NameRater {
			t.Fatalf("exit reported for %s, want rater", e.Name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("crash of the rater was not reported")
	}

	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(b)), []string{"query", "joiner", "ingest"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("services stopped in order %v, want %v", got, want)
	}
	for _, c := range st.Children {
		if alive(c.Pid) && sameProcess(c) {
			t.Errorf("child %s (pid %d) still running after Stop", c.Name, c.Pid)
		}
	}
	if _, running, err := ReadState(s.Dir()); !errors.Is(err, ErrNotRunning) || running {
		t.Fatalf("after Stop ReadState = running %v, %v; want ErrNotRunning", running, err)
	}
	if err := Down(ctx, s.Dir(), time.Second); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Down after Stop = %v, want ErrNotRunning", err)
	}
}

// TestStartFailureStopsStarted checks that a service failing its start
// stops what was already started and names the failing service.
func TestStartFailureStopsStarted(t *testing.T) {
	binDir := fakeBinDir(t)
	opts := testOptions(t, binDir)
	opts.Env = []string{"FAKE_RECORD=" + filepath.Join(opts.Dir, "stops")}
	// joiner cannot listen: its address is taken.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	opts.JoinerAddr = ln.Addr().String()
	opts.StartTimeout = 5 * time.Second
	ctx := context.Background()

	s, err := newStack(opts)
	if err != nil {
		t.Fatal(err)
	}
	err = s.startService(ctx, NameIngest)
	if err == nil {
		err = s.startService(ctx, NameJoiner)
	}
	if err == nil || !strings.Contains(err.Error(), "joiner") {
		t.Fatalf("start with a taken joiner port: %v, want an error naming the joiner", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(opts.Dir, "stops"))
	if strings.TrimSpace(string(b)) != "ingest" {
		t.Fatalf("stopped %q, want ingest", b)
	}
}

// TestStartClickHouseAndBroker runs Start with no services: ClickHouse
// (when a server binary is installed), migrations and the broker, twice on
// the same directory to check that a restart reuses the data.
func TestStartClickHouseAndBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse")
	}
	testenv.ClickHouseServer(t)
	opts := testOptions(t, buildBroker(t))
	opts.Services = []string{}
	opts.NoInstall = true
	opts.StartTimeout = 90 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < 2; i++ {
		s, err := Start(ctx, opts)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		opts = s.Options()
		if st := s.State(); st.Status != StatusReady || len(st.Children) != 2 {
			t.Errorf("state %+v, want ready with clickhouse and broker", st)
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
	}
}

// TestDown stops a supervisor running in another process through its state
// file, as `stack down` does after `stack up -detach`.
func TestDown(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "stops")
	var stderr bytes.Buffer
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "FAKE_SUPERVISOR_DIR="+dir, "FAKE_BIN="+fakeBinDir(t), "FAKE_RECORD="+record)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("supervisor stderr:\n%s", stderr.String())
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		st, running, err := ReadState(dir)
		if err == nil && running && st.Status == StatusReady {
			if st.Pid != cmd.Process.Pid || len(st.Children) != 4 {
				t.Fatalf("state %+v, want pid %d and 4 children", st, cmd.Process.Pid)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("supervisor not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := Down(context.Background(), dir, 30*time.Second); err != nil {
		t.Fatalf("Down: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("supervisor exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor still running after Down returned")
	}
	b, _ := os.ReadFile(record)
	if got := strings.Join(strings.Fields(string(b)), ","); got != "query,rater,joiner,ingest" {
		t.Fatalf("stop order %s, want query,rater,joiner,ingest", got)
	}
	if err := Down(context.Background(), dir, time.Second); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("second Down = %v, want ErrNotRunning", err)
	}
}

// TestComponentRestart kills and restarts single components of a running
// stack (fake services, the real broker and ClickHouse): each comes back
// on its address with its data, no kill is reported as an unexpected
// exit, and Stop keeps the reverse start order.
func TestComponentRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse")
	}
	testenv.ClickHouseServer(t)
	opts, record := fakeStackOptions(t)
	opts.Services = []string{NameIngest, NameQuery}
	opts.NoInstall = true
	opts.StartTimeout = 90 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)

	healthy := func() error {
		resp, err := http.Get(s.IngestURL() + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	pidOf := func(name string) int {
		for _, c := range s.State().Children {
			if c.Name == name {
				return c.Pid
			}
		}
		return 0
	}

	before := pidOf(NameIngest)
	if err := s.Kill(NameIngest); err != nil {
		t.Fatal(err)
	}
	if healthy() == nil {
		t.Fatal("ingest answers after Kill")
	}
	if err := s.Kill(NameIngest); !errors.Is(err, ErrComponentState) {
		t.Fatalf("Kill of a stopped service = %v, want ErrComponentState", err)
	}
	if err := s.StartComponent(ctx, NameIngest); err != nil {
		t.Fatal(err)
	}
	if err := healthy(); err != nil {
		t.Fatalf("ingest after StartComponent: %v", err)
	}
	if after := pidOf(NameIngest); after == before || !alive(after) {
		t.Fatalf("ingest pid %d after restart (was %d), want a new live process", after, before)
	}
	if err := s.StartComponent(ctx, NameIngest); !errors.Is(err, ErrComponentState) {
		t.Fatalf("StartComponent of a running service = %v, want ErrComponentState", err)
	}
	if err := s.Kill(NameRater); !errors.Is(err, ErrComponentState) {
		t.Fatalf("Kill of a service the stack does not run = %v, want ErrComponentState", err)
	}

	// The broker keeps what it acknowledged across a SIGKILL.
	rec := produceProbe(t, ctx, s.BrokerAddr())
	if err := s.Kill(NameBroker); err != nil {
		t.Fatal(err)
	}
	if err := s.StartComponent(ctx, NameBroker); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(mustClient(t, s.BrokerAddr()))
	ends, err := adm.ListEndOffsets(ctx, rec.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup(rec.Topic, rec.Partition); !ok || o.Offset != rec.Offset+1 {
		t.Fatalf("end offset after broker kill and restart = %+v, want %d", o, rec.Offset+1)
	}

	// ClickHouse keeps the migrated schema across a kill and a stop.
	for _, kill := range []bool{true, false} {
		if kill {
			err = s.Kill(NameClickHouse)
		} else {
			err = s.StopComponent(ctx, NameClickHouse)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.StartComponent(ctx, NameClickHouse); err != nil {
			t.Fatal(err)
		}
		if err := s.migrate(ctx); err != nil {
			t.Fatalf("ClickHouse after restart (kill %v): %v", kill, err)
		}
	}

	select {
	case e := <-s.Exited():
		t.Fatalf("a deliberate kill was reported as an unexpected exit: %v", e)
	default:
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(string(b)), ","); got != "query,ingest" {
		t.Fatalf("services stopped in order %s, want query,ingest", got)
	}
}

// produceProbe produces one record to broker, on a client it closes
// again, and returns it with the partition and offset it got.
func produceProbe(t *testing.T, ctx context.Context, broker string) *kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: contract.TopicPlatformRecords, Key: []byte("maas/node-1"), Value: []byte(`{"event_id":"e1"}`)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return rec
}

func mustClient(t *testing.T, broker string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
