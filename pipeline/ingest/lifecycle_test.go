package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// checkFor polls cond until it holds or the deadline passes.
func checkFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	t.Fatalf("metric %v is neither counter nor gauge", m.Desc())
	return 0
}

// syncBuffer is a log sink tests can read while the gateway writes.
type syncBuffer struct {
	mu  sync.Mutex // mu protects buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// auditLines returns the audit log lines whose "event" is ev.
func (b *syncBuffer) auditLines(t *testing.T, ev string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["audit"] == true && m["event"] == ev {
			out = append(out, m)
		}
	}
	return out
}

// served is a gateway running under Serve (the binary's lifecycle) in
// front of a kfake broker.
type served struct {
	cluster *kfake.Cluster
	gw      *Gateway
	addr    string
	logs    *syncBuffer
	stop    context.CancelFunc
	done    chan error
	names   contract.Topics
}

func newServed(t *testing.T, edit func(*Options), so ServeOptions) *served {
	t.Helper()
	logs := &syncBuffer{}
	cluster, gw, names := newTestGateway(t, logs, edit)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{cluster: cluster, gw: gw, addr: ln.Addr().String(), logs: logs, stop: cancel, done: make(chan error, 1), names: names}
	go func() { s.done <- gw.Serve(ctx, ln, so) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return")
		}
		cluster.Close()
	})
	return s
}

// count returns the number of records in topic.
func (s *served) count(t *testing.T, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return recordCount(t, kadm.NewClient(cl), topic)
}

// slowRequest starts a POST whose body arrives in two parts: the first
// now, the rest when finish is called. It returns once the gateway has
// admitted the request.
type slowRequest struct {
	pw     *io.PipeWriter
	rest   []byte
	result chan slowResult
}

type slowResult struct {
	status int
	resp   Response
	err    error
}

func startSlow(t *testing.T, hc *http.Client, url, key string, lines [][]byte, chunked bool) *slowRequest {
	t.Helper()
	body := bytes.Join(lines, []byte("\n"))
	half := len(body) / 2
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, url+EventsPath, pr)
	if err != nil {
		t.Fatal(err)
	}
	if !chunked {
		req.ContentLength = int64(len(body))
	}
	req.Header.Set("Authorization", "Bearer "+key)
	sr := &slowRequest{pw: pw, rest: body[half:], result: make(chan slowResult, 1)}
	go func() {
		res, err := hc.Do(req)
		if err != nil {
			sr.result <- slowResult{err: err}
			return
		}
		defer res.Body.Close()
		var r Response
		data, _ := io.ReadAll(res.Body)
		_ = json.Unmarshal(data, &r)
		sr.result <- slowResult{status: res.StatusCode, resp: r}
	}()
	if _, err := pw.Write(body[:half]); err != nil {
		t.Fatal(err)
	}
	return sr
}

func (sr *slowRequest) finish(t *testing.T) slowResult {
	t.Helper()
	if _, err := sr.pw.Write(sr.rest); err != nil {
		t.Fatal(err)
	}
	_ = sr.pw.Close()
	select {
	case r := <-sr.result:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("slow request never answered")
		return slowResult{}
	}
}

func observations(t *testing.T, prefix string, n int) [][]byte {
	var lines [][]byte
	for i := range n {
		lines = append(lines, enc(t, observation(fmt.Sprintf("%s-%03d", prefix, i), fmt.Sprint("node-", i))))
	}
	return lines
}

// When the in-flight limit (requests or body bytes) is reached, a further
// request answers 503 busy with Retry-After at once, and the admitted one
// still succeeds.
func TestBusyAnswers503(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Options)
		chunked bool
	}{
		{"requests", func(o *Options) { o.MaxInflight = 1 }, false},
		// A chunked body of unknown length reserves the whole MaxBodyBytes.
		{"bytes", func(o *Options) { o.MaxBodyBytes, o.MaxInflightBytes = 64<<10, 64<<10 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, tc.edit)
			slow := startSlow(t, e.srv.Client(), e.srv.URL, fleetKey, observations(t, "slow", 20), tc.chunked)
			checkFor(t, "the slow request to be admitted", func() bool { return metricValue(t, e.gw.m.inflight) == 1 })

			_, err := e.post(fleetKey, enc(t, observation("fast-1", "node-1")))
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || se.Code != "busy" || se.RetryAfter <= 0 {
				t.Fatalf("err = %v, want 503 busy with Retry-After", err)
			}
			if got := metricValue(t, e.gw.m.busy); got != 1 {
				t.Fatalf("busy counter %v", got)
			}
			if r := slow.finish(t); r.err != nil || r.status != http.StatusOK || r.resp.Accepted != 20 {
				t.Fatalf("admitted request: %+v", r)
			}
			if n := e.count(e.names.Observations); n != 20 {
				t.Fatalf("%d records, want the 20 of the admitted request", n)
			}
			if got := e.gw.inflightBytes.Load(); got != 0 {
				t.Fatalf("%d body bytes still reserved", got)
			}
		})
	}
}

func TestTooManyLines(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.MaxLines = 10 })
	_, err := e.post(fleetKey, observations(t, "l", 11)...)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("err = %v, want 413", err)
	}
	if resp := e.mustPost(fleetKey, observations(t, "l", 9)...); resp.Accepted != 9 {
		t.Fatalf("%+v", resp)
	}
}

// Shutdown with a request in flight: the request is finished, written and
// answered 200; new connections are refused; Serve returns cleanly and
// every acknowledged event is in the broker.
func TestShutdownDrainsInflight(t *testing.T) {
	s := newServed(t, nil, ServeOptions{ShutdownTimeout: 15 * time.Second})
	url := "http://" + s.addr
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	checkFor(t, "the server to listen", func() bool {
		res, err := hc.Get(url + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})

	slow := startSlow(t, hc, url, fleetKey, observations(t, "drain", 200), false)
	checkFor(t, "the request to be admitted", func() bool { return metricValue(t, s.gw.m.inflight) == 1 })
	s.stop() // what SIGTERM does in cmd/ingest
	checkFor(t, "the drain to start", func() bool { return s.gw.draining.Load() })

	// New connections are refused once the listener is closed.
	checkFor(t, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil && errors.Is(err, syscall.ECONNREFUSED)
	})

	r := slow.finish(t)
	if r.err != nil || r.status != http.StatusOK || r.resp.Accepted != 200 {
		t.Fatalf("in-flight request during shutdown: %+v", r)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		s.done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
	if n := s.count(t, s.names.Observations); n != 200 {
		t.Fatalf("%d records in the broker, want the 200 acknowledged", n)
	}
}

// A request reaching a draining gateway (a kept-alive connection) answers
// 503 shutting_down, and /healthz fails so balancers move away.
func TestDrainingRefuses(t *testing.T) {
	e := newTestEnv(t, nil)
	e.gw.Drain()
	_, err := e.post(fleetKey, enc(t, observation("o-1", "n-1")))
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || se.Code != "shutting_down" || se.RetryAfter <= 0 {
		t.Fatalf("err = %v, want 503 shutting_down", err)
	}
	if code, _ := e.fetch("/healthz"); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz while draining: %d", code)
	}
	if e.countAll() != 0 {
		t.Fatal("a draining gateway wrote records")
	}
}

// Revoking a key in the keys file takes effect without a restart, under a
// new policy_rev; the revoked key's attempts are audited and counted; a
// broken file leaves the policy in force.
func TestKeysReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	fleet := keys.KeySpec{SHA256: keys.HashKey(fleetKey), Grant: keys.Grant{ActorID: "SYSTEM::fleet", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}
	write := func(data []byte) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // atomic, as operators should
			t.Fatal(err)
		}
	}
	write(enc(t, keys.KeyFile{Keys: []keys.KeySpec{fleet}}))
	kr, err := keys.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newServed(t, func(o *Options) { o.Keys = kr }, ServeOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal, 1)
	watched := make(chan struct{})
	go func() { defer close(watched); s.gw.WatchKeys(ctx, path, 20*time.Millisecond, hup) }()
	defer func() { cancel(); <-watched }()

	cl := func(key string) *Client { return &Client{URL: "http://" + s.addr, APIKey: key} }
	rev1 := s.gw.PolicyRev()
	resp, err := cl(fleetKey).Post(context.Background(), [][]byte{enc(t, observation("o-1", "n-1"))})
	if err != nil || resp.PolicyRev != rev1 {
		t.Fatalf("before reload: %v %+v", err, resp)
	}

	revoked := fleet
	revoked.Revoked = true
	write(enc(t, keys.KeyFile{Keys: []keys.KeySpec{revoked,
		{SHA256: keys.HashKey("new-key"), Grant: keys.Grant{ActorID: "SYSTEM::fleet-v2", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}}}))
	checkFor(t, "the new policy", func() bool { return s.gw.PolicyRev() != rev1 })
	rev2 := s.gw.PolicyRev()

	_, err = cl(fleetKey).Post(context.Background(), [][]byte{enc(t, observation("o-2", "n-1"))})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked key: %v, want 401", err)
	}
	resp, err = cl("new-key").Post(context.Background(), [][]byte{enc(t, observation("o-3", "n-1"))})
	if err != nil || resp.PolicyRev != rev2 || resp.Accepted != 1 {
		t.Fatalf("new key: %v %+v", err, resp)
	}
	if n := s.count(t, s.names.Observations); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}

	changed := s.logs.auditLines(t, "policy_rev_changed")
	if len(changed) != 1 || changed[0]["old_policy_rev"] != rev1 || changed[0]["policy_rev"] != rev2 || changed[0]["revoked"] != float64(1) {
		t.Fatalf("policy change audit: %v", changed)
	}
	refused := s.logs.auditLines(t, "auth_refused")
	if len(refused) != 1 || refused[0]["kind"] != "revoked" || refused[0]["actor_id"] != "SYSTEM::fleet" || refused[0]["policy_rev"] != rev2 {
		t.Fatalf("revoked key audit: %v", refused)
	}
	if got := metricValue(t, s.gw.m.authFailures.WithLabelValues("revoked")); got != 1 {
		t.Fatalf("revoked counter %v", got)
	}

	// A broken file, even forced by SIGHUP, changes nothing.
	write([]byte(`{"keys":[{"sha256":"not-a-digest"}]}`))
	hup <- syscall.SIGHUP
	checkFor(t, "the refusal", func() bool { return metricValue(t, s.gw.m.reloads.WithLabelValues("refused")) >= 1 })
	if s.gw.PolicyRev() != rev2 {
		t.Fatal("a refused file changed the policy")
	}
	if _, err := cl("new-key").Post(context.Background(), [][]byte{enc(t, observation("o-4", "n-1"))}); err != nil {
		t.Fatalf("after a refused reload: %v", err)
	}
}

// The gateway refuses extra Kafka options that would break "written once".
func TestRefusesNonIdempotentProducer(t *testing.T) {
	_, err := New(Options{Environment: contract.EnvLocalParity, Brokers: []string{"127.0.0.1:1"}, Keys: testKeyring(t),
		KafkaOpts: []kgo.Opt{kgo.DisableIdempotentWrite()}})
	if err == nil || !strings.Contains(err.Error(), "idempotent") {
		t.Fatalf("err = %v", err)
	}
}
