package ingest

import (
	"errors"
	"fmt"
	"time"
)

// ErrProdWithoutMTLS is returned when a prod gateway is configured without
// TLS client certificate authentication.
var ErrProdWithoutMTLS = errors.New("prod requires TLS client certificate authentication; Possible solutions: set -ingest.tlsCert, -ingest.tlsKey and -ingest.clientCA and map client identities in the keys file's \"clients\"")

// ErrNoClientIdentities is returned when client certificate authentication
// is on but the keys file maps no certificate to an actor.
var ErrNoClientIdentities = errors.New("client certificate authentication is on but the keys file has no \"clients\" entries; Possible solutions: add one per calling service")

// ErrTLSConfig is returned by Serve when the gateway authenticates by
// client certificate but the server would not require and verify one.
var ErrTLSConfig = errors.New("client certificate authentication needs a TLS config with ClientAuth = RequireAndVerifyClientCert and ClientCAs; Possible solutions: use service.ServerTLSConfig")

// ErrLineHasNewline is returned by Client.Post when a line contains a
// newline and so cannot be sent as one NDJSON line.
var ErrLineHasNewline = errors.New("line contains a newline; encode each event as compact JSON")

// StatusError is a non-200 answer from the gateway, as seen by Client.
type StatusError struct {
	StatusCode int           // HTTP status
	Code       string        // machine-readable error code from the body ("unauthorized", "unavailable", ...)
	Message    string        // human explanation from the body
	RetryAfter time.Duration // from the Retry-After header; 0 when absent
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("ingest: HTTP %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Retryable reports whether repeating the same request may succeed: the
// gateway was busy or could not write to the broker.
func (e *StatusError) Retryable() bool {
	return e.StatusCode == 429 || e.StatusCode >= 500
}
