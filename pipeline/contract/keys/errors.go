package keys

import (
	"errors"
	"fmt"
)

// Authentication failures. Each answers 401 and is counted by kind.
var (
	// ErrMissingKey means the request carried no bearer API key.
	ErrMissingKey = errors.New("missing API key: send Authorization: Bearer <key>")
	// ErrUnknownKey means the key's digest is not in the allowlist.
	ErrUnknownKey = errors.New("unknown API key")
	// ErrRevokedKey means the key is in the allowlist but revoked.
	ErrRevokedKey = errors.New("revoked API key")
	// ErrMissingCert means an mTLS server got a request without a
	// verified client certificate.
	ErrMissingCert = errors.New("no verified TLS client certificate")
	// ErrUnknownCert means no clients entry of the keys file names the
	// client certificate.
	ErrUnknownCert = errors.New("client certificate is not mapped to an actor in the keys file")
	// ErrRevokedCert means the certificate's identity is revoked.
	ErrRevokedCert = errors.New("revoked client certificate identity")
)

// ErrNoKeysFile is returned when a non-local environment is started without
// a keys file: only local_parity may fall back to the built-in local key.
var ErrNoKeysFile = errors.New("no API keys file; Possible solutions: set -ingest.keysFile (DRIFTLINE_INGEST_KEYS_FILE) or -query.keysFile (DRIFTLINE_QUERY_KEYS_FILE), or run with -env local_parity")

// ErrLocalKeyOutsideLocal is returned when the allowlist of a dev or prod
// process admits the well-known local_parity key.
var ErrLocalKeyOutsideLocal = errors.New("the keys file admits the built-in local_parity key, which dev and prod refuse; Possible solutions: revoke or remove that entry")

// KeyFileError says which entry of a keys file is wrong and why.
type KeyFileError struct {
	Index  int    // position of the entry: keys first, then clients
	Detail string // what is wrong
}

func (e *KeyFileError) Error() string {
	return fmt.Sprintf("keys file entry %d: %s", e.Index, e.Detail)
}
