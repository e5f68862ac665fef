package rater_test

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// TestExactlyOnceUnderSIGKILL builds the rater binary, runs it against an
// in-process broker while usage is fed (with redeliveries), kills it with
// SIGKILL at random points and restarts it several times, then checks with
// a read_committed consumer: exactly one rated line per usage_id, and the
// exact expected total.
func TestExactlyOnceUnderSIGKILL(t *testing.T) {
	rater := buildRater(t)
	brokers, names := testenv.Kafka(t, 3)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	// The usage: four units, quantities with six decimals, and one event
	// in twenty sent twice.
	const n = 20000
	prices := map[string]struct {
		price string
		prec  int
	}{"gpu_hour": {"2.450000", 2}, "app_vcpu_hour": {"0.042500", 4}, "storage_gb_hour": {"0.000139", 6}, "tokens_1k": {"0.002000", 6}}
	units := []string{"gpu_hour", "app_vcpu_hour", "storage_gb_hour", "tokens_1k"}
	var events []usage
	want := decimal.New(0, 6)
	for i := 0; i < n; i++ {
		u := usage{eventID: fmt.Sprintf("e-%06d", i), usageID: fmt.Sprintf("usage-%06d", i), source: "meter-" + fmt.Sprint(i%7),
			meteringID: fmt.Sprintf("m-%06d", i), unit: units[i%len(units)], quantity: fmt.Sprintf("%d.%06d", rng.IntN(100), rng.IntN(1000000)),
			tenant: fmt.Sprintf("t-%d", i%13)}
		p := prices[u.unit]
		amount, err := decimal.MulRound(decimal.MustParse(u.quantity), decimal.MustParse(p.price), p.prec)
		if err != nil {
			t.Fatal(err)
		}
		if want, err = decimal.Add(want, amount); err != nil {
			t.Fatal(err)
		}
		events = append(events, u)
		if i%20 == 0 {
			events = append(events, u)
		}
	}

	// Feed in chunks while the raters come and go.
	var feed sync.WaitGroup
	feed.Add(1)
	go func() {
		defer feed.Done()
		for len(events) > 0 {
			k := min(len(events), 400)
			produce(t, brokers, names.Usage, events[:k]...)
			events = events[k:]
			time.Sleep(120 * time.Millisecond)
		}
	}()

	start := func() *exec.Cmd {
		return rater.start("-kafka.brokers", brokers[0], "-kafka.createTopics=false", "-kafka.partitions", "3",
			"-rater.priceBook", rater.book, "-rater.addr", "127.0.0.1:0", "-rater.maxBatch", "300",
			"-rater.transactionalID", "rater-kill-test")
	}

	const kills = 8
	for i := 0; i < kills; i++ {
		cmd := start()
		time.Sleep(time.Duration(200+rng.IntN(1000)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		fmt.Fprintf(rater.log, "---- SIGKILL %d ----\n", i+1)
	}
	feed.Wait()

	final := start()
	testenv.CheckFor(t, 3*time.Minute, func() error {
		if got := len(readAll(t, brokers, names.Rated, 500*time.Millisecond)); got < n {
			return fmt.Errorf("%d rated lines, want %d", got, n)
		}
		return nil
	})
	rater.stop(final)

	rated := readAll(t, brokers, names.Rated, time.Second)
	seen := map[string]int{}
	total := decimal.New(0, 6)
	for _, rec := range rated {
		l := decodeRated(t, rec)
		seen[l.Payload.UsageID]++
		var err error
		if total, err = decimal.Add(total, decimal.MustParse(l.Payload.Amount)); err != nil {
			t.Fatal(err)
		}
		if string(rec.Key) != contract.UsageKey(l.Payload.MeteringSource, l.Payload.MeteringID) {
			t.Fatalf("rated line keyed %q: %s", rec.Key, rec.Value)
		}
	}
	dups := 0
	for id, c := range seen {
		if c != 1 {
			dups++
			if dups < 10 {
				t.Errorf("usage_id %s has %d rated lines", id, c)
			}
		}
	}
	if len(seen) != n || len(rated) != n {
		t.Fatalf("%d rated lines for %d usage_ids, want %d each", len(rated), len(seen), n)
	}
	if !decimal.Equal(total, want) {
		t.Fatalf("rated total %s, want %s", total, want)
	}
	if q := readAll(t, brokers, names.Quarantine, 500*time.Millisecond); len(q) != 0 {
		t.Fatalf("%d quarantine records, want none (redeliveries change nothing): %s", len(q), q[0].Value)
	}
	t.Logf("%d usage_ids rated exactly once across %d SIGKILLs; total %s", n, kills, total)
}
