package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeGateway answers like the ingest gateway: it counts lines, reports the
// redelivered ones as duplicates, and fails the first request of every
// batch with 503 when flaky is set.
type fakeGateway struct {
	mu    sync.Mutex // mu protects the fields below
	lines [][]byte
	seen  map[string]bool
	calls int
	flaky bool
	key   string
}

func (f *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/events" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	f.calls++
	if f.flaky && f.calls%2 == 1 {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	acc, dup := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		f.lines = append(f.lines, line)
		if id := eventID(line); f.seen[id] {
			dup++
		} else {
			f.seen[id] = true
			acc++
		}
	}
	fmt.Fprintf(w, `{"accepted":%d,"duplicate":%d,"rejected":0,"receipts":[]}`, acc, dup)
}

func TestFeed(t *testing.T) {
	gw := &fakeGateway{seen: map[string]bool{}, flaky: true, key: "k"}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	g := newGen(t, DefaultConfig())
	var want [][]byte
	redeliveries := 0
	_ = g.Emit(func(e *Event) error {
		want = append(want, bytes.Clone(e.Line))
		if e.Redelivery {
			redeliveries++
		}
		return nil
	})
	progress := 0
	st, err := Feed(context.Background(), srv.URL, "k", g, FeedOptions{BatchLines: 500, Progress: func(FeedStats) { progress++ }})
	if err != nil {
		t.Fatalf("Feed: %v", err)
	}
	if len(gw.lines) != len(want) {
		t.Fatalf("gateway got %d lines, want %d", len(gw.lines), len(want))
	}
	for i := range want {
		if !bytes.Equal(gw.lines[i], want[i]) {
			t.Fatalf("line %d differs or out of order", i)
		}
	}
	if st.Events != len(want) || st.Accepted != len(want)-redeliveries || st.Duplicate != redeliveries ||
		st.Retries != st.Batches || progress != st.Batches || st.Batches != (len(want)+499)/500 {
		t.Fatalf("stats %+v (events %d, redeliveries %d, progress calls %d)", st, len(want), redeliveries, progress)
	}
}

func TestFeedFailsOn4xx(t *testing.T) {
	gw := &fakeGateway{seen: map[string]bool{}, key: "right"}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	_, err := Feed(context.Background(), srv.URL, "wrong", newGen(t, DefaultConfig()), FeedOptions{})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized || gw.calls != 0 {
		t.Fatalf("err %v, calls %d", err, gw.calls)
	}
}
