package ingest

import (
	"errors"
	"fmt"
	"time"
)

// Authentication failures. Each answers 401 and is counted by kind.
var (
	// ErrMissingKey means the request carried no bearer API key.
	ErrMissingKey = errors.New("missing API key: send Authorization: Bearer <key>")
	// ErrUnknownKey means the key's digest is not in the allowlist.
	ErrUnknownKey = errors.New("unknown API key")
	// ErrRevokedKey means the key is in the allowlist but revoked.
	ErrRevokedKey = errors.New("revoked API key")
	// ErrMissingCert means an mTLS gateway got a request without a
	// verified client certificate.
	ErrMissingCert = errors.New("no verified TLS client certificate")
	// ErrUnknownCert means no clients entry of the keys file names the
	// client certificate.
	ErrUnknownCert = errors.New("client certificate is not mapped to an actor in the keys file")
	// ErrRevokedCert means the certificate's identity is revoked.
	ErrRevokedCert = errors.New("revoked client certificate identity")
)

// ErrProdWithoutMTLS is returned when a prod gateway is configured without
// TLS client certificate authentication.
var ErrProdWithoutMTLS = errors.New("prod requires TLS client certificate authentication; Possible solutions: set -ingest.tlsCert, -ingest.tlsKey and -ingest.clientCA and map client identities in the keys file's \"clients\"")

// ErrNoClientIdentities is returned when client certificate authentication
// is on but the keys file maps no certificate to an actor.
var ErrNoClientIdentities = errors.New("client certificate authentication is on but the keys file has no \"clients\" entries; Possible solutions: add one per calling service")

// ErrTLSConfig is returned by Serve when the gateway authenticates by
// client certificate but the server would not require and verify one.
var ErrTLSConfig = errors.New("client certificate authentication needs a TLS config with ClientAuth = RequireAndVerifyClientCert and ClientCAs; Possible solutions: use ServerTLSConfig")

// ErrNoKeysFile is returned when a non-local environment is started without
// a keys file: only local_parity may fall back to the built-in local key.
var ErrNoKeysFile = errors.New("no API keys file; Possible solutions: set -ingest.keysFile (or DRIFTLINE_INGEST_KEYS_FILE), or run with -env local_parity")

// ErrLocalKeyOutsideLocal is returned when the allowlist of a dev or prod
// gateway admits the well-known local_parity key.
var ErrLocalKeyOutsideLocal = errors.New("the keys file admits the built-in local_parity key, which dev and prod refuse; Possible solutions: revoke or remove that entry")

// ErrLineHasNewline is returned by Client.Post when a line contains a
// newline and so cannot be sent as one NDJSON line.
var ErrLineHasNewline = errors.New("line contains a newline; encode each event as compact JSON")

// KeyFileError says which entry of a keys file is wrong and why.
type KeyFileError struct {
	Index  int    // position of the entry in the file's "keys" array
	Detail string // what is wrong
}

func (e *KeyFileError) Error() string {
	return fmt.Sprintf("keys file entry %d: %s", e.Index, e.Detail)
}

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
