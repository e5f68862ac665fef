package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"
)

// EventsPath is the path of the ingest endpoint.
const EventsPath = "/v1/events"

// Client posts NDJSON batches to an ingest gateway. The zero HTTP uses
// http.DefaultClient. It is safe for concurrent use.
type Client struct {
	// URL is the gateway's base URL ("http://127.0.0.1:18080"); a URL
	// already ending in /v1/events is used as is.
	URL string
	// APIKey is sent as Authorization: Bearer <APIKey>.
	APIKey string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
}

// Post sends lines (one encoded envelope each, without newlines) as one
// request. A 200 answer returns its Response, whose receipts say per line
// what happened; any other answer returns a *StatusError (see
// StatusError.Retryable: on 503 nothing was accepted and the whole request
// may be resent).
func (c *Client) Post(ctx context.Context, lines [][]byte) (Response, error) {
	var body bytes.Buffer
	for i, l := range lines {
		if bytes.IndexByte(l, '\n') >= 0 {
			return Response{}, fmt.Errorf("line %d: %w", i+1, ErrLineHasNewline)
		}
		body.Grow(len(l) + 1)
		body.Write(l)
		body.WriteByte('\n')
	}
	url := strings.TrimRight(c.URL, "/")
	if !strings.HasSuffix(url, EventsPath) {
		url += EventsPath
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return Response{}, fmt.Errorf("build ingest request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("post to ingest: %w", err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return Response{}, fmt.Errorf("read ingest answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		se := &StatusError{StatusCode: res.StatusCode}
		var er ErrorResponse
		if json.Unmarshal(data, &er) == nil && er.Error != "" {
			se.Code, se.Message = er.Error, er.Message
		} else {
			se.Code, se.Message = http.StatusText(res.StatusCode), strings.TrimSpace(string(data))
		}
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
			se.RetryAfter = time.Duration(s) * time.Second
		}
		return Response{}, se
	}
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return Response{}, fmt.Errorf("decode ingest answer: %w", err)
	}
	return resp, nil
}
