package alert

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/stream/retry"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// conditions is a Source whose conditions the test sets.
type conditions struct {
	mu  sync.Mutex // protects now
	now []reader.Alertable
}

func (c *conditions) set(as ...reader.Alertable) { c.mu.Lock(); c.now = as; c.mu.Unlock() }

func (c *conditions) Alertables(context.Context) ([]reader.Alertable, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]reader.Alertable(nil), c.now...), nil
}

// receiver is an Alertmanager v2 endpoint that fails its first
// failures posts (with code, 503 if 0) and records the alerts of the
// others.
type receiver struct {
	mu       sync.Mutex // protects the fields below
	failures int
	code     int
	posts    int
	alerts   []amAlert
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want a JSON POST", http.StatusBadRequest)
		return
	}
	if r.failures > 0 {
		r.failures--
		http.Error(w, "down", cmp.Or(r.code, http.StatusServiceUnavailable))
		return
	}
	b, _ := io.ReadAll(req.Body)
	var as []amAlert
	if err := json.Unmarshal(b, &as); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.alerts = append(r.alerts, as...)
}

// count returns how many alerts were received since the last take.
func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.alerts)
}

// take returns the alerts received since the last take.
func (r *receiver) take() []amAlert {
	r.mu.Lock()
	defer r.mu.Unlock()
	as := r.alerts
	r.alerts = nil
	return as
}

func finding(id string) reader.Alertable {
	return reader.Alertable{ID: id, Kind: "finding", StartsAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Labels: map[string]string{"evidence_id": id, "severity": "critical"}, Summary: id}
}

// TestSender: each receiver gets one firing per alert while it holds and
// a resolve when it ends, through failures (retried) and a restart of the
// sender (its position is in the read model).
func TestSender(t *testing.T) {
	conn, _ := testenv.ClickHouseConn(t)
	log := reader.NewAlertLog(conn)
	src := &conditions{}
	a, b := &receiver{failures: 2}, &receiver{}
	ha, hb := httptest.NewServer(a), httptest.NewServer(b)
	t.Cleanup(ha.Close)
	t.Cleanup(hb.Close)
	var (
		mu  sync.Mutex // the receivers are served side by side
		now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	newSender := func() *Sender {
		s, err := New(Options{Webhooks: []string{ha.URL, hb.URL}, Backoff: retry.Backoff{First: time.Millisecond, Max: 10 * time.Millisecond},
			Now: clock}, src, log)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	s := newSender()
	round := func(s *Sender) {
		t.Helper()
		if err := s.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := func(r *receiver, name string, firing, resolved []string) {
		t.Helper()
		got := r.take()
		var f, res []string
		for _, al := range got {
			if al.EndsAt.IsZero() {
				f = append(f, al.Labels["alert_id"])
			} else {
				res = append(res, al.Labels["alert_id"])
			}
			if al.Labels["alertname"] == "" || al.StartsAt.IsZero() {
				t.Errorf("%s: alert without a name or start: %+v", name, al)
			}
		}
		if len(f) != len(firing) || len(res) != len(resolved) {
			t.Fatalf("%s received firing %v resolved %v, want firing %v resolved %v", name, f, res, firing, resolved)
		}
		for i := range f {
			if f[i] != firing[i] {
				t.Fatalf("%s received firing %v, want %v", name, f, firing)
			}
		}
		for i := range res {
			if res[i] != resolved[i] {
				t.Fatalf("%s received resolved %v, want %v", name, res, resolved)
			}
		}
	}

	src.set(finding("missing_provider_resource:maas/n1"))
	round(s)
	want(a, "a", []string{"missing_provider_resource:maas/n1"}, nil)
	want(b, "b", []string{"missing_provider_resource:maas/n1"}, nil)
	if a.posts != 3 {
		t.Errorf("receiver a had %d posts, want 3 (two failures retried)", a.posts)
	}
	round(s) // nothing new
	want(a, "a", nil, nil)

	s = newSender() // a restart: the position is kept
	src.set(finding("missing_provider_resource:maas/n1"), finding("route_or_dns_mismatch:gateway/g1"))
	round(s)
	want(a, "a", []string{"route_or_dns_mismatch:gateway/g1"}, nil)
	want(b, "b", []string{"route_or_dns_mismatch:gateway/g1"}, nil)

	src.set(finding("route_or_dns_mismatch:gateway/g1")) // n1 resolved
	b.failures = 1
	round(newSender())
	want(a, "a", nil, []string{"missing_provider_resource:maas/n1"})
	want(b, "b", nil, []string{"missing_provider_resource:maas/n1"})
	round(newSender())
	want(a, "a", nil, nil)
	want(b, "b", nil, nil)

	// It fires again if it opens again.
	src.set(finding("route_or_dns_mismatch:gateway/g1"), finding("missing_provider_resource:maas/n1"))
	round(s)
	want(a, "a", []string{"missing_provider_resource:maas/n1"}, nil)
}

// memLog is an in-memory Log: what each receiver was sent firing.
type memLog struct {
	mu     sync.Mutex // protects firing
	firing map[string]map[string]reader.Delivery
}

func (l *memLog) Firing(_ context.Context, receiver string) (map[string]reader.Delivery, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]reader.Delivery{}
	for id, d := range l.firing[receiver] {
		out[id] = d
	}
	return out, nil
}

func (l *memLog) Record(_ context.Context, receiver, state string, ds []reader.Delivery, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firing == nil {
		l.firing = map[string]map[string]reader.Delivery{}
	}
	if l.firing[receiver] == nil {
		l.firing[receiver] = map[string]reader.Delivery{}
	}
	for _, d := range ds {
		if state == "firing" {
			l.firing[receiver][d.ID] = d
		} else {
			delete(l.firing[receiver], d.ID)
		}
	}
	return nil
}

// split returns the ids of the alerts fired and resolved.
func split(as []amAlert) (firing, resolved []string) {
	for _, a := range as {
		if a.EndsAt.IsZero() {
			firing = append(firing, a.Labels["alert_id"])
		} else {
			resolved = append(resolved, a.Labels["alert_id"])
		}
	}
	slices.Sort(firing)
	slices.Sort(resolved)
	return firing, resolved
}

// TestSenderLagUnknown: a consumer lag that cannot be read (the broker is
// down) leaves the lag alerts as they are, neither fired nor resolved,
// and holds back none of the others; the round reports the lag error.
func TestSenderLagUnknown(t *testing.T) {
	rcv := &receiver{}
	h := httptest.NewServer(rcv)
	t.Cleanup(h.Close)
	src := &conditions{}
	var lagErr error
	lag := map[string]int64{"driftline-joiner": 200_000}
	s, err := New(Options{Webhooks: []string{h.URL}, Backoff: retry.Backoff{First: time.Millisecond, Max: time.Millisecond},
		Lag: func(context.Context) (map[string]int64, error) { return lag, lagErr }}, src, &memLog{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := func(firing, resolved string) {
		t.Helper()
		f, r := split(rcv.take())
		if strings.Join(f, " ") != firing || strings.Join(r, " ") != resolved {
			t.Fatalf("receiver got firing %v resolved %v, want firing [%s] resolved [%s]", f, r, firing, resolved)
		}
	}
	src.set(finding("missing_provider_resource:maas/n1"))
	if err := s.Round(ctx); err != nil {
		t.Fatal(err)
	}
	want("lag:driftline-joiner missing_provider_resource:maas/n1", "")

	lagErr = errors.New("broker unreachable")
	src.set(finding("route_or_dns_mismatch:gateway/g1")) // n1 resolved, g1 new
	if err := s.Round(ctx); err == nil || !strings.Contains(err.Error(), "broker unreachable") {
		t.Fatalf("Round = %v, want the lag error", err)
	}
	want("route_or_dns_mismatch:gateway/g1", "missing_provider_resource:maas/n1")

	lagErr, lag = nil, map[string]int64{"driftline-joiner": 10}
	if err := s.Round(ctx); err != nil {
		t.Fatal(err)
	}
	want("", "lag:driftline-joiner")
}

// TestSenderReceiverDown: a receiver that stays down holds back neither
// the other receivers nor the later rounds (the sender running as
// cmd/query runs it), and gets what it missed once it is back.
func TestSenderReceiverDown(t *testing.T) {
	down, up := &receiver{failures: 1 << 30}, &receiver{}
	hd, hu := httptest.NewServer(down), httptest.NewServer(up)
	t.Cleanup(hd.Close)
	t.Cleanup(hu.Close)
	src := &conditions{}
	src.set(finding("missing_provider_resource:maas/n1"))
	s, err := New(Options{Webhooks: []string{hd.URL, hu.URL}, Interval: 50 * time.Millisecond,
		Backoff: retry.Backoff{First: 10 * time.Millisecond, Max: 50 * time.Millisecond}}, src, &memLog{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for ctx.Err() == nil && up.count() == 0 { // the first round reached up
		time.Sleep(5 * time.Millisecond)
	}
	src.set(finding("missing_provider_resource:maas/n1"), finding("route_or_dns_mismatch:gateway/g1")) // a later round's alert
	time.Sleep(300 * time.Millisecond)
	if f, _ := split(up.take()); strings.Join(f, " ") != "missing_provider_resource:maas/n1 route_or_dns_mismatch:gateway/g1" {
		t.Fatalf("the healthy receiver got firing %v while the other was down, want both findings once", f)
	}
	down.mu.Lock()
	down.failures = 0
	down.mu.Unlock()
	<-done
	if f, _ := split(down.take()); strings.Join(f, " ") != "missing_provider_resource:maas/n1 route_or_dns_mismatch:gateway/g1" {
		t.Fatalf("the receiver that came back got firing %v, want what it missed", f)
	}
}

// TestSenderReceiverRefuses: a receiver answering 4xx is asked once a
// round, the refusal logged and counted; the alerts go out once it takes
// them.
func TestSenderReceiverRefuses(t *testing.T) {
	rcv := &receiver{failures: 2, code: http.StatusBadRequest}
	h := httptest.NewServer(rcv)
	t.Cleanup(h.Close)
	src := &conditions{}
	src.set(finding("missing_provider_resource:maas/n1"))
	reg := prometheus.NewRegistry()
	s, err := New(Options{Webhooks: []string{h.URL}, Backoff: retry.Backoff{First: time.Millisecond, Max: time.Millisecond}, Registerer: reg},
		src, &memLog{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round := 1; round <= 2; round++ {
		if err := s.Round(ctx); err == nil {
			t.Fatalf("round %d: Round = nil, want the refusal", round)
		}
		rcv.mu.Lock()
		posts := rcv.posts
		rcv.mu.Unlock()
		if posts != round {
			t.Fatalf("round %d: %d posts, want one a round", round, posts)
		}
	}
	if n := testutil.ToFloat64(s.failed.WithLabelValues(h.URL)); n != 2 {
		t.Errorf("failed deliveries counted %v, want 2", n)
	}
	if err := s.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if f, _ := split(rcv.take()); len(f) != 1 {
		t.Fatalf("receiver got firing %v once it took alerts, want the finding", f)
	}
}

// TestSenderTimesValidForAlertmanager: a finding opened by an event ahead
// of the sender's clock (the gateway and joiner accept up to 5 min of
// skew) and resolved soon after is fired with a start no later than the
// clock, and resolved with an endsAt not before its start: every alert
// passes Alertmanager's own validation (model.Alert.Validate, which the
// v2 API applies; an invalid alert is answered 400).
func TestSenderTimesValidForAlertmanager(t *testing.T) {
	rcv := &receiver{}
	h := httptest.NewServer(rcv)
	t.Cleanup(h.Close)
	wall := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	src := &conditions{}
	f := finding("identity_mismatch:maas/n1")
	f.StartsAt = wall.Add(3 * time.Minute)
	src.set(f)
	s, err := New(Options{Webhooks: []string{h.URL}, Backoff: retry.Backoff{First: time.Millisecond, Max: time.Millisecond},
		Now: func() time.Time { wall = wall.Add(15 * time.Second); return wall }}, src, &memLog{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, open := range []bool{true, false} {
		if !open {
			src.set() // resolved a round later
		}
		if err := s.Round(ctx); err != nil {
			t.Fatal(err)
		}
		as := rcv.take()
		if len(as) != 1 {
			t.Fatalf("receiver got %d alerts, want 1", len(as))
		}
		a := as[0]
		if a.StartsAt.After(wall) {
			t.Errorf("alert startsAt %v is after the sender's clock %v", a.StartsAt, wall)
		}
		ma := model.Alert{Labels: model.LabelSet{}, StartsAt: a.StartsAt, EndsAt: a.EndsAt}
		for k, v := range a.Labels {
			ma.Labels[model.LabelName(k)] = model.LabelValue(v)
		}
		if err := ma.Validate(); err != nil {
			t.Errorf("alert %s (startsAt %v, endsAt %v) is refused by Alertmanager: %v", a.Labels["alert_id"], a.StartsAt, a.EndsAt, err)
		}
	}
}

// TestSenderEndsAtOfAStartAhead: a firing recorded with a start ahead of
// the clock (before the start was capped at the clock) is resolved with
// endsAt at that start, not before it.
func TestSenderEndsAtOfAStartAhead(t *testing.T) {
	rcv := &receiver{}
	h := httptest.NewServer(rcv)
	t.Cleanup(h.Close)
	wall := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ahead := wall.Add(3 * time.Minute)
	log := &memLog{}
	if err := log.Record(context.Background(), h.URL, "firing", []reader.Delivery{{ID: "identity_mismatch:maas/n1",
		Labels: map[string]string{"alertname": "Driftline_finding", "alert_id": "identity_mismatch:maas/n1"}, StartsAt: ahead}}, wall); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Webhooks: []string{h.URL}, Now: func() time.Time { return wall }}, &conditions{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	as := rcv.take()
	if len(as) != 1 || !as[0].EndsAt.Equal(ahead) {
		t.Fatalf("receiver got %+v, want the resolve with endsAt %v", as, ahead)
	}
}

// TestSenderReplicasKeepResolve: two query replicas share the position
// (docs/actions.md). Replica B's round read the finding open and is still
// retrying its receiver while replica A fires and resolves it; B's late
// firing is recorded above A's resolve (versioned by the time the
// receiver took it), so a later round resolves it again and the
// receiver's last word is the resolve.
func TestSenderReplicasKeepResolve(t *testing.T) {
	conn, _ := testenv.ClickHouseConn(t)
	log := reader.NewAlertLog(conn)
	rcv := &receiver{failures: 1} // B's first post fails
	h := httptest.NewServer(rcv)
	t.Cleanup(h.Close)
	var (
		mu  sync.Mutex // protects now
		now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	src := &conditions{}
	id := "missing_provider_resource:maas/n1"
	src.set(finding(id))
	newSender := func(first time.Duration) *Sender {
		s, err := New(Options{Webhooks: []string{h.URL}, Backoff: retry.Backoff{First: first, Max: first}, Now: clock}, src, log)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := newSender(time.Millisecond), newSender(time.Second)
	ctx := context.Background()
	bDone := make(chan error, 1)
	go func() { bDone <- b.Round(ctx) }()
	for { // B has read the finding open and its first post failed
		rcv.mu.Lock()
		p := rcv.posts
		rcv.mu.Unlock()
		if p >= 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := a.Round(ctx); err != nil { // A fires
		t.Fatal(err)
	}
	src.set()                            // resolved
	if err := a.Round(ctx); err != nil { // A resolves
		t.Fatal(err)
	}
	if err := <-bDone; err != nil { // B's retry delivers its (stale) firing
		t.Fatal(err)
	}
	for _, s := range []*Sender{a, b, a, b} { // later rounds of both replicas
		if err := s.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var last *amAlert
	for _, al := range rcv.take() {
		if al.Labels["alert_id"] == id {
			last = &al
		}
	}
	if last == nil || last.EndsAt.IsZero() {
		t.Fatalf("the receiver's last alert for %s is firing (%+v) although the finding resolved: the resolve is lost", id, last)
	}
}
