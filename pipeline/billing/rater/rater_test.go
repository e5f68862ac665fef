package rater_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

func deployBook(t testing.TB) *pricebook.Store {
	t.Helper()
	s, err := pricebook.Open(filepath.Join("..", "..", "..", "deploy", "pricebook.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRateAndQuarantine runs a rater in process over every kind of usage it
// must not rate, and checks what reaches billing.rated and the quarantine.
func TestRateAndQuarantine(t *testing.T) {
	brokers, names := testenv.Kafka(t, 3)
	u := func(id, unit, qty string) usage {
		return usage{eventID: "e-" + id, usageID: id, source: "gpu-meter", meteringID: "m-" + id, unit: unit, quantity: qty, tenant: "t1"}
	}
	ok1 := u("u1", "gpu_hour", "3.000000")           // 7.35
	ok2 := u("u2", "app_vcpu_hour", "1.234567")      // 0.0525 (0.05246909...)
	ok3 := u("u3", "storage_gb_hour", "1000.000000") // 0.139000
	dup := ok1
	dup.usageID, dup.eventID = "u1-bis", "e-u1-bis" // same metering key, another usage_id
	wrongEnv := u("u9", "gpu_hour", "1")
	wrongEnv.env = contract.EnvProd
	produce(t, brokers, names.Usage,
		ok1, ok2, ok3,
		ok1, // redelivery: changes nothing
		dup,
		u("u4", "gpu_minute", "1"),      // unknown
		u("u5", "gpu_hour_legacy", "1"), // retired
		u("u6", "gpu_hour", "-1.5"),     // negative
		u("u7", "gpu_hour", "0.0000000000000000001"), // not a decimal: the validator refuses it
		u("u8", "gpu_hour", "90000000000000000.00"),  // amount out of range
		wrongEnv,
	)

	opts := rater.Options{
		StageOptions: stream.StageOptions{Brokers: brokers, Topics: names}, Prices: deployBook(t), MaxBatch: 4,
		Now: func() time.Time { return time.Date(2026, 11, 21, 10, 16, 0, 0, time.UTC) },
	}
	defer streamtest.Start(t, "rater", func(ctx context.Context) (*rater.Rater, error) { return rater.New(ctx, opts) })()

	// Records the validator refuses are quarantined without an event_id.
	wantQ := map[string]contract.Reason{
		"e-u1-bis": contract.ReasonDuplicateUsage, "e-u4": contract.ReasonUnknownUnit, "e-u5": contract.ReasonRetiredUnit,
		"e-u6": contract.ReasonBadQuantity, "e-u8": contract.ReasonAmountOutOfRange,
		"/" + string(contract.ReasonInvalidField): contract.ReasonInvalidField, "/" + string(contract.ReasonWrongEnvironment): contract.ReasonWrongEnvironment,
	}
	testenv.CheckFor(t, 30*time.Second, func() error {
		if n := len(readAll(t, brokers, names.Quarantine, 300*time.Millisecond)); n != len(wantQ) {
			return fmt.Errorf("%d quarantine records, want %d", n, len(wantQ))
		}
		return nil
	})
	for _, rec := range readAll(t, brokers, names.Quarantine, 300*time.Millisecond) {
		q := decodeQuarantine(t, rec)
		key := q.EventID
		if key == "" {
			key = "/" + string(q.Reason)
		}
		if want, ok := wantQ[key]; !ok || q.Reason != want {
			t.Errorf("quarantined %s for %s (%s), want %q", q.EventID, q.Reason, q.Detail, want)
		}
		if h := rec.Headers; len(h) != 3 || h[2].Key != contract.HeaderReason || string(h[2].Value) != string(q.Reason) {
			t.Errorf("quarantine headers %v", h)
		}
	}

	// A read that stops at its first idle poll can miss a partition whose
	// fetch is slow (the race detector on a loaded machine): read again
	// until the lines are there, as the quarantine above.
	want := map[string]string{"u1": "7.35", "u2": "0.0525", "u3": "0.139000"}
	var rated []*kgo.Record
	testenv.CheckFor(t, 30*time.Second, func() error {
		if rated = readAll(t, brokers, names.Rated, 300*time.Millisecond); len(rated) < len(want) {
			return fmt.Errorf("%d rated lines, want %d", len(rated), len(want))
		}
		return nil
	})
	if len(rated) != len(want) {
		t.Fatalf("%d rated lines, want %d", len(rated), len(want))
	}
	for _, rec := range rated {
		l := decodeRated(t, rec)
		p := l.Payload
		if want[p.UsageID] != p.Amount || p.UnitVersion != 1 || p.Currency != "USD" || l.Producer != "rater" ||
			l.EventID != rater.RatedEventID(p.UsageID) || string(rec.Key) != contract.UsageKey(p.MeteringSource, p.MeteringID) {
			t.Errorf("rated line %s", rec.Value)
		}
		if rec.Partition != contract.Partition(rec.Key, 3) {
			t.Errorf("rated line on partition %d, key hashes to %d", rec.Partition, contract.Partition(rec.Key, 3))
		}
	}
}

func TestRatedEventID(t *testing.T) {
	if got := rater.RatedEventID("u1"); got != "rated:u1" {
		t.Fatalf("RatedEventID = %q", got)
	}
	long := string(make([]byte, 200))
	if got := rater.RatedEventID(long); len(got) > contract.MaxIDLen || got != rater.RatedEventID(long) {
		t.Fatalf("long RatedEventID = %q", got)
	}
}

// TestRatedEventIDsDiffer: two usage_ids never share a rated event_id
// (CONTRACT 2: event_id is unique per producer) short of a SHA-256
// collision, though a usage_id too long for an event_id is named by its
// digest: a usage_id that spells such a digest is named by its own, and
// the rated line carries RatedEventID.
func TestRatedEventIDsDiffer(t *testing.T) {
	long := strings.Repeat("x", contract.MaxIDLen-len("rated:")+1)
	sum := sha256.Sum256([]byte(long))
	spelled := "sha256:" + hex.EncodeToString(sum[:])
	ids := []string{"u1", long, long[1:], spelled, strings.ToUpper(spelled), spelled[:len(spelled)-1] + "g", "rated:" + spelled}
	seen := map[string]string{}
	for _, id := range ids {
		eid := rater.RatedEventID(id)
		if other, ok := seen[eid]; ok {
			t.Fatalf("usage_ids %q and %q share the rated event_id %q", other, id, eid)
		}
		seen[eid] = id
		if len(eid) > contract.MaxIDLen || eid != rater.RatedEventID(id) {
			t.Fatalf("usage_id %q: rated event_id %q", id, eid)
		}
	}
	for _, id := range []string{long[1:], strings.ToUpper(spelled)} {
		if got := rater.RatedEventID(id); got != "rated:"+id {
			t.Fatalf("usage_id %q: rated event_id %q, want the usage_id's own", id, got)
		}
	}
	b, err := pricebook.Parse([]byte(`{"units":[{"unit_id":"gpu_hour","version":1,"precision":2,"unit_price":"2.450000","currency":"USD","rating_category":"compute","lifecycle":"active"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		u := &contract.Usage{UsageID: id, MeteringSource: "gw", MeteringID: "m-1", UnitID: "gpu_hour", Quantity: "1", TenantID: "t-1", ProductID: "p"}
		r := rater.Rate(b, nil, u)
		line := rater.AppendRated(nil, &contract.Envelope{OccurredAt: time.Now()}, u, &r, contract.EnvLocalParity, time.Now())
		var l struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(line, &l); err != nil || l.EventID != rater.RatedEventID(id) {
			t.Fatalf("usage_id %q: rated line's event_id %q (%v), want %q", id, l.EventID, err, rater.RatedEventID(id))
		}
	}
}

func TestNewNeedsPrices(t *testing.T) {
	if _, err := rater.New(context.Background(), rater.Options{StageOptions: stream.StageOptions{Brokers: []string{"127.0.0.1:1"}}}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("New without a price book: %v", err)
	}
}
