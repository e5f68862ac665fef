// Package alert pushes the conditions of CONTRACT section 9.3 to
// Alertmanager-compatible webhooks: new critical findings (not
// suppressed), node gates that block production, stopped financial
// automation and consumer lag over its SLO. Each receiver gets one firing
// per alert (per evidence_id for a finding) while it holds, and a resolve
// when it ends, as a POST of the Alertmanager v2 alert list.
//
// The sender keeps its position per receiver in the read model
// (reader.AlertLog): what it sent firing and has not resolved. A round
// reads the conditions, sends what is new and resolves what ended, to
// each receiver side by side, retried with backoff for at most an
// Interval (a 4xx refusal is not retried), and records a delivery only
// once the receiver took it: what a receiver missed is sent again in a
// later round. A sender killed mid-round
// sends that round again after its restart: a receiver may see a firing
// twice (Alertmanager merges them by labels), never none, and a resolve
// is never lost.
package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/stream/retry"
)

// Source reads the conditions that hold now; a *reader.Reader is one.
type Source interface {
	Alertables(ctx context.Context) ([]reader.Alertable, error)
}

// Log keeps the sender's position per receiver; a *reader.AlertLog is
// one.
type Log interface {
	Firing(ctx context.Context, receiver string) (map[string]reader.Delivery, error)
	Record(ctx context.Context, receiver, state string, ds []reader.Delivery, at time.Time) error
}

// Lagger reports the consumer lag (records) of the watched groups; nil
// sends no lag alerts.
type Lagger func(ctx context.Context) (map[string]int64, error)

// Options configure a Sender.
type Options struct {
	// Webhooks are the receivers' URLs (an Alertmanager's
	// http://host:9093/api/v2/alerts). Required.
	Webhooks []string
	// Interval is how often the conditions are read. Default 15s.
	Interval time.Duration
	// LagSLO is the consumer lag, in records, above which a group is
	// alerted. Default 100000.
	LagSLO int64
	// Lag reports the lag of the watched groups. Default none.
	Lag Lagger
	// Backoff spaces the retries of a receiver that does not answer 2xx,
	// for at most an Interval a round. Default 1s doubling up to 1m.
	Backoff retry.Backoff
	// GeneratorURL is the base URL of the query UI, linked from each
	// alert. Default none.
	GeneratorURL string
	// Client sends the webhooks. Default a client with a 10s timeout.
	Client *http.Client
	// Logger logs failed deliveries. Default slog.Default().
	Logger *slog.Logger
	// Registerer takes the sender's metrics. Default none.
	Registerer prometheus.Registerer
	// Now is the wall clock, read by the receivers' deliveries side by
	// side (safe for concurrent use). Default time.Now.
	Now func() time.Time
}

// DefaultOptions returns Options with the defaults of Interval and
// LagSLO written out, for a command's flags to start from; the caller
// sets Webhooks.
func DefaultOptions() Options {
	return Options{Interval: 15 * time.Second, LagSLO: 100_000}
}

// Sender sends alerts; Run drives it.
type Sender struct {
	opts   Options
	source Source
	log    Log
	sent   *prometheus.CounterVec // alerts delivered, by receiver and state
	failed *prometheus.CounterVec // failed deliveries (retried, then in the next round), by receiver
}

// New returns a Sender of the conditions of source, keeping its position
// in log.
func New(opts Options, source Source, log Log) (*Sender, error) {
	if len(opts.Webhooks) == 0 {
		return nil, errors.New("alert: no webhook; Possible solutions: pass -alert.webhook")
	}
	d := DefaultOptions()
	if opts.Interval <= 0 {
		opts.Interval = d.Interval
	}
	if opts.LagSLO <= 0 {
		opts.LagSLO = d.LagSLO
	}
	if opts.Backoff == (retry.Backoff{}) {
		opts.Backoff = retry.Backoff{First: time.Second, Max: time.Minute}
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Sender{opts: opts, source: source, log: log,
		sent:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_alerts_sent_total", Help: "Alerts delivered to a webhook, by receiver and state (firing, resolved)."}, []string{"receiver", "state"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_alert_delivery_errors_total", Help: "Webhook deliveries that failed (retried with backoff, then in the next round), by receiver."}, []string{"receiver"})}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.sent); err != nil {
			return nil, err
		}
		if err := opts.Registerer.Register(s.failed); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Run sends rounds every Interval until ctx ends.
func (s *Sender) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		if err := s.Round(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("alert round failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round reads the conditions once and brings every receiver up to date:
// it returns once each took what is new and what ended, or refused it,
// or was tried for an Interval, or ctx ended; a receiver's failure is
// returned, and what it missed is sent in a later round. A
// consumer lag it cannot read leaves the lag alerts as they are, sends
// the others, and is returned after.
func (s *Sender) Round(ctx context.Context) error {
	now := s.opts.Now().UTC()
	conds, err := s.source.Alertables(ctx)
	if err != nil {
		return fmt.Errorf("read alert conditions: %w", err)
	}
	// unknown are the alertnames whose conditions could not be read this
	// round: their alerts are neither fired nor resolved.
	unknown := map[string]bool{}
	var lagErr error
	if s.opts.Lag != nil {
		lags, err := s.opts.Lag(ctx)
		if err != nil {
			// Unknown is not "within the SLO": resolving a lag alert now
			// would be a guess. The other alerts go out all the same (a
			// broker that is down must not hold back a finding); the next
			// round asks again.
			lagErr = fmt.Errorf("read consumer lag: %w", err)
			unknown[alertname("consumer_lag")] = true
			lags = nil
		}
		groups := make([]string, 0, len(lags))
		for g := range lags {
			groups = append(groups, g)
		}
		slices.Sort(groups)
		for _, g := range groups {
			if lags[g] > s.opts.LagSLO {
				conds = append(conds, reader.Alertable{ID: "lag:" + g, Kind: "consumer_lag", StartsAt: now,
					Labels:  map[string]string{"consumer_group": g, "severity": "critical"},
					Summary: fmt.Sprintf("consumer group %s lags %d records (SLO %d)", g, lags[g], s.opts.LagSLO)})
			}
		}
	}
	// The receivers are served side by side: one that is down does not
	// hold back the others.
	errs := make([]error, len(s.opts.Webhooks)+1)
	var wg sync.WaitGroup
	for i, url := range s.opts.Webhooks {
		wg.Go(func() { errs[i] = s.deliver(ctx, url, conds, unknown, now) })
	}
	wg.Wait()
	errs[len(s.opts.Webhooks)] = lagErr
	return errors.Join(errs...)
}

// deliver brings one receiver up to date; the alerts named in unknown
// are left as they are.
func (s *Sender) deliver(ctx context.Context, url string, conds []reader.Alertable, unknown map[string]bool, now time.Time) error {
	firing, err := s.log.Firing(ctx, url)
	if err != nil {
		return err
	}
	holds := make(map[string]bool, len(conds))
	var fire, resolve []reader.Delivery
	var body []amAlert
	for _, c := range conds {
		holds[c.ID] = true
		if _, ok := firing[c.ID]; ok {
			continue
		}
		// An event may be ahead of this clock (by up to the accepted
		// skew): a start in the future is sent as now, so that no endsAt
		// falls before it.
		d := reader.Delivery{ID: c.ID, Labels: labels(c), StartsAt: minTime(c.StartsAt, now)}
		fire = append(fire, d)
		body = append(body, amAlert{Labels: d.Labels, Annotations: map[string]string{"summary": c.Summary},
			StartsAt: d.StartsAt, GeneratorURL: s.generatorURL(c)})
	}
	for id, d := range firing {
		if !holds[id] && !unknown[d.Labels["alertname"]] {
			resolve = append(resolve, d)
			// Alertmanager refuses an endsAt before startsAt (400), as a
			// start recorded ahead of this clock would give.
			body = append(body, amAlert{Labels: d.Labels, StartsAt: d.StartsAt, EndsAt: maxTime(now, d.StartsAt)})
		}
	}
	if len(body) == 0 {
		return nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic("BUG: alerts do not encode: " + err.Error())
	}
	// A receiver is tried for at most an Interval a round. What it has
	// not taken by then is not recorded, so the next round sends it again.
	pctx, cancel := context.WithTimeout(ctx, s.opts.Interval)
	defer cancel()
	err = retry.Do(pctx.Done(), s.opts.Backoff, func() error { return s.post(pctx, url, b) }, func(err error, wait time.Duration) {
		s.failed.WithLabelValues(url).Inc()
		s.opts.Logger.Warn("alert webhook failed; retrying", "receiver", url, "alerts", len(body), "wait", wait, "err", err)
	})
	if err != nil {
		if _, refused := errors.AsType[*refusedError](err); refused {
			s.failed.WithLabelValues(url).Inc()
			s.opts.Logger.Warn("alert webhook refused the alerts; sending them again next round", "receiver", url, "alerts", len(body), "err", err)
		}
		return fmt.Errorf("%w (sent again next round)", err)
	}
	// Versioned by the time the receiver took them, not by the round's
	// start: another replica's resolve recorded while this post was
	// retried sorts below this (stale) firing, which a later round then
	// resolves again.
	at := s.opts.Now().UTC()
	if err := s.log.Record(ctx, url, "firing", fire, at); err != nil {
		return err
	}
	if err := s.log.Record(ctx, url, "resolved", resolve, at); err != nil {
		return err
	}
	s.sent.WithLabelValues(url, "firing").Add(float64(len(fire)))
	s.sent.WithLabelValues(url, "resolved").Add(float64(len(resolve)))
	return nil
}

// amAlert is one alert of the Alertmanager v2 API (postableAlert).
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// labels returns the alert's labels: its own, its name and its id.
func labels(c reader.Alertable) map[string]string {
	l := make(map[string]string, len(c.Labels)+3)
	for k, v := range c.Labels {
		if v != "" {
			l[k] = v
		}
	}
	l["alertname"] = alertname(c.Kind)
	l["alert_id"] = c.ID
	l["source"] = "driftline"
	return l
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// alertname is the alertname of the alerts of kind.
func alertname(kind string) string { return "Driftline_" + kind }

func (s *Sender) generatorURL(c reader.Alertable) string {
	if s.opts.GeneratorURL == "" || c.Kind != "finding" {
		return s.opts.GeneratorURL
	}
	return s.opts.GeneratorURL + "#/finding/" + c.ID
}

func (s *Sender) post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return retry.Permanent(fmt.Errorf("alert webhook %s: %w", url, err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("alert webhook %s: %w", url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("alert webhook %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			// The same body would be refused again: not retried this round.
			return retry.Permanent(&refusedError{err})
		}
		return err
	}
	return nil
}

// refusedError is a 4xx answer other than 408 and 429: the receiver
// refuses the alerts themselves.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }
