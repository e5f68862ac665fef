package demo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/driftline/driftline/pipeline/api/client"
)

// A stack whose consumers already applied events held an earlier feed;
// one whose status does not come yet counts as empty.
func TestEarlierEvents(t *testing.T) {
	status := `{"consumers":[{"name":"joiner","events":5986},{"name":"rater","events":14}],"findings":{},"lag":{}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(status))
	}))
	defer srv.Close()
	if n := earlierEvents(context.Background(), &client.Client{BaseURL: srv.URL, APIKey: "k"}); n != 6000 {
		t.Fatalf("earlier events %d, want 6000", n)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	if n := earlierEvents(context.Background(), &client.Client{BaseURL: down.URL, APIKey: "k"}); n != 0 {
		t.Fatalf("earlier events %d from a status that did not come, want 0", n)
	}
	if note := earlierFeedNote(6000); !strings.Contains(note, "6000 events") || !strings.Contains(note, "conflicting_usage") || !strings.Contains(note, "make distclean") {
		t.Fatalf("the note does not say what happened and what to do: %s", note)
	}
}
