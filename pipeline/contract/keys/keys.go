// Package keys is the keys file: the one allowlist of API keys and client
// certificate identities that the ingest gateway and the query API both
// load. An entry names an actor and what it admits: event types and
// producers at the gateway, roles and their scopes at the query API
// (CONTRACT 9.1). Keys are kept only as SHA-256 digests.
package keys

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract"
)

// LocalActorID is the actor of the built-in local_parity key.
const LocalActorID = "SYSTEM::local-fleet"

// KeyFile is the JSON document of a keys file (-ingest.keysFile,
// -query.keysFile):
//
//	{"keys": [{
//	  "sha256": "<hex SHA-256 of the API key>",
//	  "actor_id": "SYSTEM::maas-scanner",
//	  "source_type": "SYSTEM",
//	  "event_types": ["provider.observation", "provider.scan_completed"],
//	  "producers": ["maas-scanner-eu1"],
//	  "revoked": false
//	}, {
//	  "sha256": "<hex SHA-256 of another key>",
//	  "actor_id": "HUMAN::ana",
//	  "source_type": "HUMAN",
//	  "roles": ["finance"],
//	  "tenant_ids": ["tenant-001"]
//	}],
//	 "clients": [{
//	  "identity": "uri:spiffe://driftline/maas-scanner",
//	  "actor_id": "SYSTEM::maas-scanner",
//	  "source_type": "SYSTEM",
//	  "event_types": ["provider.observation"]
//	}]}
//
// Keys are stored only as digests (`printf %s "$KEY" | sha256sum`), so the
// file is not a secret by itself. Clients map a verified TLS client
// certificate to an actor (mTLS mode, see Options.ClientCertAuth).
type KeyFile struct {
	Keys    []KeySpec    `json:"keys"`
	Clients []ClientSpec `json:"clients,omitempty"`
}

// KeySpec is one allowlisted API key.
type KeySpec struct {
	// SHA256 is the lowercase hex SHA-256 digest of the key.
	SHA256 string `json:"sha256"`
	Grant
}

// ClientSpec maps a TLS client certificate, verified against the
// gateway's client CA, to an actor.
type ClientSpec struct {
	// Identity names the certificate: "sha256:<hex digest of the leaf
	// certificate's DER>", "uri:<URI SAN>" (a SPIFFE id, say),
	// "dns:<DNS SAN>" or "cn:<subject common name>". When several entries
	// match one certificate the most specific wins, in that order.
	Identity string `json:"identity"`
	Grant
}

// Grant is what a key or client certificate admits: the actor it stamps,
// what it may send to the gateway and what it may read and do at the
// query API. Its fields are inline in a keys file entry. An entry names
// event types, roles or both.
type Grant struct {
	// ActorID is SYSTEM::<name> or HUMAN::<id>; stamped as actor_id.
	ActorID string `json:"actor_id"`
	// SourceType is SYSTEM or HUMAN and must match the ActorID prefix.
	SourceType string `json:"source_type"`
	// EventTypes the key may send; anything else is rejected
	// (unauthorized_event_type). Empty only for a key of the query API
	// (Roles set), which then may send nothing.
	EventTypes []string `json:"event_types"`
	// Producers the key may send as; empty means any producer.
	Producers []string `json:"producers,omitempty"`
	// Revoked keys answer 401 and are audited.
	Revoked bool `json:"revoked,omitempty"`
	// Roles at the query API (contract.Roles); none: the key reads
	// nothing there.
	Roles []string `json:"roles,omitempty"`
	// TenantIDs scope the finance role: billing rows of other tenants are
	// invisible. Empty: every tenant.
	TenantIDs []string `json:"tenant_ids,omitempty"`
	// AuthorityLevels scope the operator role's node actions to nodes
	// whose master of record is one of these (contract.AuthorityLevels).
	// Empty: every level.
	AuthorityLevels []string `json:"authority_levels,omitempty"`
}

// Identity kinds of ClientSpec.Identity, most specific first.
var identityKinds = []string{"sha256", "uri", "dns", "cn"}

// HashKey returns the digest under which an API key is allowlisted.
func HashKey(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:])
}

// Principal is an authenticated caller and what it may send and read.
type Principal struct {
	ActorID    string
	SourceType string
	// KeyID is a short prefix of the key digest, safe to log.
	KeyID string
	// Roles, TenantIDs and AuthorityLevels are the entry's, sorted and
	// without repeats; callers must not modify them.
	Roles           []string
	TenantIDs       []string
	AuthorityLevels []string
	types           map[string]bool
	producers       map[string]bool // nil: any producer
}

// MayType reports whether the principal may send events of type t.
func (p *Principal) MayType(t string) bool { return p.types[t] }

// MayProduce reports whether the principal may send as producer.
func (p *Principal) MayProduce(producer string) bool {
	return p.producers == nil || p.producers[producer]
}

// Keyring is a validated allowlist of API keys and client certificate
// identities. It is immutable and safe for concurrent use.
type Keyring struct {
	specs        []KeySpec             // sorted by digest, normalised; feeds the policy revision
	clients      []ClientSpec          // sorted by identity, normalised; feeds the policy revision
	byHash       map[string]*Principal // digest -> principal (revoked keys included, see revoked)
	revoked      map[string]bool       // digest -> revoked
	byIdent      map[string]*Principal // "kind:value" -> principal (revoked entries included)
	identRevoked map[string]bool       // "kind:value" -> revoked
	builtin      bool                  // the local_parity fallback keyring
}

// NewKeyring validates specs and builds a keyring of API keys only.
func NewKeyring(specs []KeySpec) (*Keyring, error) {
	return NewKeyringWithClients(specs, nil)
}

// NewKeyringWithClients validates API key and client certificate entries
// and builds a keyring. Errors are *KeyFileError; client entries are
// numbered after the keys.
func NewKeyringWithClients(specs []KeySpec, clients []ClientSpec) (*Keyring, error) {
	kr := &Keyring{byHash: make(map[string]*Principal, len(specs)), revoked: make(map[string]bool),
		byIdent: make(map[string]*Principal, len(clients)), identRevoked: make(map[string]bool)}
	for i, s := range specs {
		s.SHA256 = strings.ToLower(strings.TrimSpace(s.SHA256))
		if b, err := hex.DecodeString(s.SHA256); err != nil || len(b) != sha256.Size {
			return nil, &KeyFileError{i, "sha256 must be 64 hex digits (the SHA-256 of the key, never the key)"}
		}
		if _, dup := kr.byHash[s.SHA256]; dup {
			return nil, &KeyFileError{i, "sha256 is listed twice"}
		}
		p, err := s.principal(s.SHA256[:8])
		if err != nil {
			return nil, &KeyFileError{i, err.Error()}
		}
		kr.byHash[s.SHA256] = p
		kr.revoked[s.SHA256] = s.Revoked
		kr.specs = append(kr.specs, s)
	}
	for j, c := range clients {
		i := len(specs) + j
		kind, value, ok := strings.Cut(strings.TrimSpace(c.Identity), ":")
		if !ok || value == "" || !slices.Contains(identityKinds, kind) {
			return nil, &KeyFileError{i, fmt.Sprintf("identity %q must be sha256:<hex>, uri:<uri>, dns:<name> or cn:<name>", c.Identity)}
		}
		if kind == "sha256" {
			value = strings.ToLower(value)
			if b, err := hex.DecodeString(value); err != nil || len(b) != sha256.Size {
				return nil, &KeyFileError{i, "identity sha256: must be 64 hex digits (the SHA-256 of the certificate's DER)"}
			}
		}
		c.Identity = kind + ":" + value
		if _, dup := kr.byIdent[c.Identity]; dup {
			return nil, &KeyFileError{i, "identity is listed twice"}
		}
		p, err := c.principal(c.Identity)
		if err != nil {
			return nil, &KeyFileError{i, err.Error()}
		}
		kr.byIdent[c.Identity] = p
		kr.identRevoked[c.Identity] = c.Revoked
		kr.clients = append(kr.clients, c)
	}
	slices.SortFunc(kr.specs, func(a, b KeySpec) int { return strings.Compare(a.SHA256, b.SHA256) })
	slices.SortFunc(kr.clients, func(a, b ClientSpec) int { return strings.Compare(a.Identity, b.Identity) })
	return kr, nil
}

// principal validates g and returns the principal it admits, named keyID;
// it normalises g's lists, which feed the policy revision.
func (g *Grant) principal(keyID string) (*Principal, error) {
	p, err := newPrincipal(g.ActorID, g.SourceType, g.EventTypes, g.Producers, len(g.Roles) > 0)
	if err != nil {
		return nil, err
	}
	if err := g.checkRoles(); err != nil {
		return nil, err
	}
	p.KeyID = keyID
	g.EventTypes = sortedUnique(g.EventTypes)
	g.Producers = sortedUnique(g.Producers)
	g.Roles = sortedUnique(g.Roles)
	g.TenantIDs = sortedUnique(g.TenantIDs)
	g.AuthorityLevels = sortedUnique(g.AuthorityLevels)
	p.Roles, p.TenantIDs, p.AuthorityLevels = g.Roles, g.TenantIDs, g.AuthorityLevels
	return p, nil
}

// checkRoles validates the query API's part of a grant: known roles, and
// scopes only beside the role they narrow.
func (g *Grant) checkRoles() error {
	for _, r := range g.Roles {
		if !slices.Contains(contract.Roles, r) {
			return fmt.Errorf("role %q is unknown; roles are %s", r, strings.Join(contract.Roles, ", "))
		}
	}
	if len(g.TenantIDs) > 0 && !slices.Contains(g.Roles, contract.RoleFinance) {
		return errors.New("tenant_ids scope the finance role, which this entry lacks")
	}
	for _, t := range g.TenantIDs {
		if t == "" {
			return errors.New("tenant_ids has an empty tenant")
		}
	}
	if len(g.AuthorityLevels) > 0 && !slices.Contains(g.Roles, contract.RoleOperator) {
		return errors.New("authority_levels scope the operator role, which this entry lacks")
	}
	for _, l := range g.AuthorityLevels {
		if !slices.Contains(contract.AuthorityLevels, l) {
			return fmt.Errorf("authority level %q is unknown; levels are %s", l, strings.Join(contract.AuthorityLevels, ", "))
		}
	}
	return nil
}

func newPrincipal(actorID, sourceType string, types, producers []string, hasRoles bool) (*Principal, error) {
	prefix, name, ok := strings.Cut(actorID, "::")
	if !ok || name == "" || (prefix != contract.SourceSystem && prefix != contract.SourceHuman) {
		return nil, fmt.Errorf("actor_id %q must be SYSTEM::<name> or HUMAN::<id>", actorID)
	}
	if sourceType != prefix {
		return nil, fmt.Errorf("source_type %q must match the actor_id prefix %q", sourceType, prefix)
	}
	if len(types) == 0 && !hasRoles {
		return nil, errors.New("event_types is empty; list the event types this key may send, or the roles it has at the query API")
	}
	p := &Principal{ActorID: actorID, SourceType: sourceType, types: map[string]bool{}}
	for _, t := range types {
		if contract.TopicOf(t) == "" {
			return nil, fmt.Errorf("event type %q is unknown", t)
		}
		p.types[t] = true
	}
	if len(producers) > 0 {
		p.producers = map[string]bool{}
		for _, pr := range producers {
			if pr == "" {
				return nil, errors.New("producers has an empty name")
			}
			p.producers[pr] = true
		}
	}
	return p, nil
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// ParseKeyring parses a KeyFile document.
func ParseKeyring(data []byte) (*Keyring, error) {
	var f KeyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse keys file: %w", err)
	}
	return NewKeyringWithClients(f.Keys, f.Clients)
}

// LoadKeyring reads and parses a keys file.
func LoadKeyring(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read keys file: %w", err)
	}
	kr, err := ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	return kr, nil
}

// LocalKeyring admits apiKey as LocalActorID with every event type. It is
// the local_parity fallback when no keys file is configured.
func LocalKeyring(apiKey string) *Keyring {
	kr, err := NewKeyring([]KeySpec{{SHA256: HashKey(apiKey), Grant: Grant{
		ActorID:    LocalActorID,
		SourceType: contract.SourceSystem,
		EventTypes: contract.AllTypes,
		Roles:      []string{contract.RoleAdmin},
	}}})
	if err != nil {
		panic("BUG: built-in local keyring is invalid: " + err.Error())
	}
	kr.builtin = true
	return kr
}

// OpenKeyring returns the keyring for environment: the keys file at path,
// or, in local_parity only, LocalKeyring(localKey) when path is empty.
// The local key is admin at the query API.
func OpenKeyring(environment, path, localKey string) (*Keyring, error) {
	if path != "" {
		return LoadKeyring(path)
	}
	if environment != contract.EnvLocalParity {
		return nil, ErrNoKeysFile
	}
	return LocalKeyring(localKey), nil
}

// Builtin reports whether this is the local_parity fallback keyring.
func (k *Keyring) Builtin() bool { return k.builtin }

// Len returns the number of allowlisted keys and client identities,
// revoked ones included.
func (k *Keyring) Len() int { return len(k.specs) + len(k.clients) }

// Clients returns the number of client certificate identities.
func (k *Keyring) Clients() int { return len(k.clients) }

// Specs returns the key entries, normalised and sorted by digest; callers
// must not modify them.
func (k *Keyring) Specs() []KeySpec { return k.specs }

// ClientSpecs returns the client certificate entries, normalised and
// sorted by identity; callers must not modify them.
func (k *Keyring) ClientSpecs() []ClientSpec { return k.clients }

// Revoked returns the number of revoked keys and client identities.
func (k *Keyring) Revoked() int {
	n := 0
	for _, r := range k.revoked {
		if r {
			n++
		}
	}
	for _, r := range k.identRevoked {
		if r {
			n++
		}
	}
	return n
}

// Admits reports whether apiKey is allowlisted and not revoked.
func (k *Keyring) Admits(apiKey string) bool {
	d := HashKey(apiKey)
	_, ok := k.byHash[d]
	return ok && !k.revoked[d]
}

// Authenticate returns the principal of apiKey, or ErrMissingKey,
// ErrUnknownKey or ErrRevokedKey. Lookup is by digest, so the comparison
// never touches the secret itself. With ErrRevokedKey the revoked
// principal is returned too, for the audit log; it must not be authorised.
func (k *Keyring) Authenticate(apiKey string) (*Principal, error) {
	if apiKey == "" {
		return nil, ErrMissingKey
	}
	d := HashKey(apiKey)
	p, ok := k.byHash[d]
	if !ok {
		return nil, ErrUnknownKey
	}
	if k.revoked[d] {
		return p, ErrRevokedKey
	}
	return p, nil
}

// AuthenticateCert returns the principal of a verified client certificate
// (the leaf of a chain the TLS layer verified against the client CA), or
// ErrMissingCert, ErrUnknownCert or ErrRevokedCert. The most specific
// matching identity decides (see ClientSpec.Identity).
func (k *Keyring) AuthenticateCert(leaf *x509.Certificate) (*Principal, error) {
	if leaf == nil {
		return nil, ErrMissingCert
	}
	for _, id := range CertIdentities(leaf) {
		p, ok := k.byIdent[id]
		if !ok {
			continue
		}
		if k.identRevoked[id] {
			return p, ErrRevokedCert
		}
		return p, nil
	}
	return nil, ErrUnknownCert
}

// CertIdentities lists the identities a certificate can be named by in a
// keys file, most specific first.
func CertIdentities(c *x509.Certificate) []string {
	sum := sha256.Sum256(c.Raw)
	ids := []string{"sha256:" + hex.EncodeToString(sum[:])}
	for _, u := range c.URIs {
		ids = append(ids, "uri:"+u.String())
	}
	for _, d := range c.DNSNames {
		ids = append(ids, "dns:"+d)
	}
	if c.Subject.CommonName != "" {
		ids = append(ids, "cn:"+c.Subject.CommonName)
	}
	return ids
}

// CheckEnvironment applies the rule every environment but local_parity
// keeps: the well-known local key must not be admitted.
func CheckEnvironment(environment, localKey string, k *Keyring) error {
	if environment != contract.EnvLocalParity && k.Admits(localKey) {
		return ErrLocalKeyOutsideLocal
	}
	return nil
}
