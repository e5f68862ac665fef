package access

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// HeaderPolicyRev is the header of every answer naming the access policy
// revision the request was decided under.
const HeaderPolicyRev = "Driftline-Policy-Rev"

// HeaderRequestID is the header of every answer naming the request in the
// log and the audit log.
const HeaderRequestID = "Driftline-Request-Id"

// policyRevLen is the length in hex digits of a policy revision, as the
// gateway's.
const policyRevLen = 12

// ErrProdWithoutMTLS is returned when a prod query service is configured
// without TLS client certificates.
var ErrProdWithoutMTLS = errors.New("prod requires TLS client certificates; Possible solutions: set -query.tlsCert, -query.tlsKey and -query.clientCA")

// GuardOptions configures a Guard.
type GuardOptions struct {
	// Environment is the service's environment (contract.EnvLocalParity,
	// EnvDev, EnvProd); outside local_parity the local key is refused.
	Environment string
	// LocalKey is the well-known local_parity key, refused elsewhere.
	LocalKey string
	// MTLS says the server requires verified client certificates; it
	// feeds the policy revision and is required in prod.
	MTLS bool
	// Logger logs policy changes. Default slog.Default().
	Logger *slog.Logger
}

// Guard holds the access policy in force: the keyring and its revision.
// It is safe for concurrent use; SetKeys swaps the policy atomically, so
// a request is decided under one revision.
type Guard struct {
	opts GuardOptions
	// mu serialises SetKeys.
	mu  sync.Mutex
	pol atomic.Pointer[policy]
}

type policy struct {
	keys *keys.Keyring
	rev  string
}

// NewGuard returns a guard over kr, refusing what the environment
// refuses (the local key outside local_parity, prod without mTLS).
func NewGuard(opts GuardOptions, kr *keys.Keyring) (*Guard, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Environment == contract.EnvProd && !opts.MTLS {
		return nil, ErrProdWithoutMTLS
	}
	g := &Guard{opts: opts}
	if err := g.check(kr); err != nil {
		return nil, err
	}
	g.pol.Store(&policy{keys: kr, rev: g.rev(kr)})
	return g, nil
}

func (g *Guard) check(kr *keys.Keyring) error {
	if kr == nil {
		return errors.New("access: no keyring; see keys.OpenKeyring")
	}
	return keys.CheckEnvironment(g.opts.Environment, g.opts.LocalKey, kr)
}

// rev digests what decides access: the environment, the transport mode,
// the route table and the keys file's entries (digests, actors, roles,
// scopes, revocations).
func (g *Guard) rev(kr *keys.Keyring) string {
	doc := struct {
		Environment string            `json:"environment"`
		MTLS        bool              `json:"mtls"`
		Routes      map[string]Rule   `json:"routes"`
		Keys        []keys.KeySpec    `json:"keys"`
		Clients     []keys.ClientSpec `json:"clients"`
	}{g.opts.Environment, g.opts.MTLS, Routes, kr.Specs(), kr.ClientSpecs()}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("BUG: access policy does not encode: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:policyRevLen]
}

// PolicyRev returns the revision in force.
func (g *Guard) PolicyRev() string { return g.pol.Load().rev }

// Environment returns the service's environment.
func (g *Guard) Environment() string { return g.opts.Environment }

// SetKeys puts kr in force and returns the revision it starts; a keyring
// the environment refuses leaves the old one in force.
func (g *Guard) SetKeys(kr *keys.Keyring) (string, error) {
	if err := g.check(kr); err != nil {
		g.opts.Logger.Error("keys refused; the previous access policy stays in force", "event", "policy_reload_refused", "policy_rev", g.PolicyRev(), "err", err)
		return g.PolicyRev(), err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.pol.Load()
	next := &policy{keys: kr, rev: g.rev(kr)}
	if next.rev == old.rev {
		return old.rev, nil
	}
	g.pol.Store(next)
	g.opts.Logger.Warn("access policy revision changed", "event", "policy_rev_changed", "old_policy_rev", old.rev, "policy_rev", next.rev,
		"keys", len(kr.Specs()), "clients", len(kr.ClientSpecs()), "revoked", kr.Revoked())
	return next.rev, nil
}

// Watch reloads the keys file at path whenever its contents change
// (checked every interval; 0 disables polling) or a value arrives on hup
// (SIGHUP), until ctx ends. A file that does not parse or that the
// environment refuses leaves the policy in force, logged. Revoking a key:
// set "revoked": true in the file, then wait one interval or send SIGHUP.
func (g *Guard) Watch(ctx context.Context, path string, interval time.Duration, hup <-chan os.Signal) {
	keys.Watch(ctx, path, interval, hup, func(kr *keys.Keyring) {
		_, _ = g.SetKeys(kr) // logs its own outcome
	}, func(err error, unreadable bool) {
		what := "keys file refused"
		if unreadable {
			what = "keys file unreadable"
		}
		g.opts.Logger.Error(what+"; the previous access policy stays in force", "event", "policy_reload_refused", "path", path, "err", err)
	})
}

// Authenticate returns the principal of r under the policy in force: by
// its bearer key, or, without one, by its verified TLS client
// certificate when the keys file maps that to an entry with roles. The
// error is one of package keys' (ErrMissingKey, ErrUnknownKey,
// ErrRevokedKey, ...); the revision is returned in every case. A revoked
// key's principal is returned too, for the audit log; it is not
// authorised.
func (g *Guard) Authenticate(r *http.Request) (Principal, error) {
	pol := g.pol.Load()
	key, err := BearerKey(r.Header.Get("Authorization"))
	if err == nil {
		p, aerr := pol.keys.Authenticate(key)
		if p == nil {
			return Principal{PolicyRev: pol.rev}, aerr
		}
		return principalOf(p, pol.rev), aerr
	}
	if errors.Is(err, keys.ErrMissingKey) && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		p, cerr := pol.keys.AuthenticateCert(r.TLS.PeerCertificates[0])
		if p != nil && len(p.Roles) > 0 {
			return principalOf(p, pol.rev), cerr
		}
	}
	return Principal{PolicyRev: pol.rev}, err
}

// ErrMalformedAuth means the Authorization header is not "Bearer <key>".
var ErrMalformedAuth = errors.New("malformed Authorization header: send Authorization: Bearer <key>")

// maxKeyLen bounds a key: a longer header is refused before hashing.
const maxKeyLen = 512

// BearerKey returns the key of an Authorization header value "Bearer
// <key>" (the scheme case-insensitive); keys.ErrMissingKey when the
// header is empty, ErrMalformedAuth when it is anything else.
func BearerKey(header string) (string, error) {
	if header == "" {
		return "", keys.ErrMissingKey
	}
	scheme, key, ok := strings.Cut(header, " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" || len(key) > maxKeyLen || strings.ContainsAny(key, " \t\r\n") {
		return "", ErrMalformedAuth
	}
	return key, nil
}
