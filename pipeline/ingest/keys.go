package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/event"
)

// Source types of an actor, stamped as the source_type header.
const (
	SourceSystem = "SYSTEM"
	SourceHuman  = "HUMAN"
)

// LocalActorID is the actor of the built-in local_parity key.
const LocalActorID = "SYSTEM::local-fleet"

// KeyFile is the JSON document of -ingest.keysFile:
//
//	{"keys": [{
//	  "sha256": "<hex SHA-256 of the API key>",
//	  "actor_id": "SYSTEM::maas-scanner",
//	  "source_type": "SYSTEM",
//	  "event_types": ["provider.observation", "provider.scan_completed"],
//	  "producers": ["maas-scanner-eu1"],
//	  "revoked": false
//	}]}
//
// Keys are stored only as digests (`printf %s "$KEY" | sha256sum`), so the
// file is not a secret by itself.
type KeyFile struct {
	Keys []KeySpec `json:"keys"`
}

// KeySpec is one allowlisted API key.
type KeySpec struct {
	// SHA256 is the lowercase hex SHA-256 digest of the key.
	SHA256 string `json:"sha256"`
	// ActorID is SYSTEM::<name> or HUMAN::<id>; stamped as actor_id.
	ActorID string `json:"actor_id"`
	// SourceType is SYSTEM or HUMAN and must match the ActorID prefix.
	SourceType string `json:"source_type"`
	// EventTypes the key may send; anything else is rejected
	// (unauthorized_event_type). Must not be empty.
	EventTypes []string `json:"event_types"`
	// Producers the key may send as; empty means any producer.
	Producers []string `json:"producers,omitempty"`
	// Revoked keys answer 401.
	Revoked bool `json:"revoked,omitempty"`
}

// HashKey returns the digest under which an API key is allowlisted.
func HashKey(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:])
}

// Principal is an authenticated caller and what it may send.
type Principal struct {
	ActorID    string
	SourceType string
	// KeyID is a short prefix of the key digest, safe to log.
	KeyID     string
	types     map[string]bool
	producers map[string]bool // nil: any producer
}

// MayType reports whether the principal may send events of type t.
func (p *Principal) MayType(t string) bool { return p.types[t] }

// MayProduce reports whether the principal may send as producer.
func (p *Principal) MayProduce(producer string) bool {
	return p.producers == nil || p.producers[producer]
}

// Keyring is a validated API key allowlist. It is immutable and safe for
// concurrent use.
type Keyring struct {
	specs   []KeySpec             // sorted by digest, normalised; feeds the policy revision
	byHash  map[string]*Principal // digest -> principal (revoked keys included, see revoked)
	revoked map[string]bool       // digest -> revoked
	builtin bool                  // the local_parity fallback keyring
}

// NewKeyring validates specs and builds a keyring.
func NewKeyring(specs []KeySpec) (*Keyring, error) {
	kr := &Keyring{byHash: make(map[string]*Principal, len(specs)), revoked: make(map[string]bool)}
	for i, s := range specs {
		s.SHA256 = strings.ToLower(strings.TrimSpace(s.SHA256))
		if b, err := hex.DecodeString(s.SHA256); err != nil || len(b) != sha256.Size {
			return nil, &KeyFileError{i, "sha256 must be 64 hex digits (the SHA-256 of the key, never the key)"}
		}
		if _, dup := kr.byHash[s.SHA256]; dup {
			return nil, &KeyFileError{i, "sha256 is listed twice"}
		}
		prefix, name, ok := strings.Cut(s.ActorID, "::")
		if !ok || name == "" || (prefix != SourceSystem && prefix != SourceHuman) {
			return nil, &KeyFileError{i, fmt.Sprintf("actor_id %q must be SYSTEM::<name> or HUMAN::<id>", s.ActorID)}
		}
		if s.SourceType != prefix {
			return nil, &KeyFileError{i, fmt.Sprintf("source_type %q must match the actor_id prefix %q", s.SourceType, prefix)}
		}
		if len(s.EventTypes) == 0 {
			return nil, &KeyFileError{i, "event_types is empty; list the event types this key may send"}
		}
		p := &Principal{ActorID: s.ActorID, SourceType: s.SourceType, KeyID: s.SHA256[:8], types: map[string]bool{}}
		for _, t := range s.EventTypes {
			if event.TopicOf(t) == "" {
				return nil, &KeyFileError{i, fmt.Sprintf("event type %q is unknown", t)}
			}
			p.types[t] = true
		}
		if len(s.Producers) > 0 {
			p.producers = map[string]bool{}
			for _, pr := range s.Producers {
				if pr == "" {
					return nil, &KeyFileError{i, "producers has an empty name"}
				}
				p.producers[pr] = true
			}
		}
		s.EventTypes = sortedUnique(s.EventTypes)
		s.Producers = sortedUnique(s.Producers)
		kr.byHash[s.SHA256] = p
		kr.revoked[s.SHA256] = s.Revoked
		kr.specs = append(kr.specs, s)
	}
	slices.SortFunc(kr.specs, func(a, b KeySpec) int { return strings.Compare(a.SHA256, b.SHA256) })
	return kr, nil
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
	return NewKeyring(f.Keys)
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
	kr, err := NewKeyring([]KeySpec{{
		SHA256:     HashKey(apiKey),
		ActorID:    LocalActorID,
		SourceType: SourceSystem,
		EventTypes: event.AllTypes,
	}})
	if err != nil {
		panic("BUG: built-in local keyring is invalid: " + err.Error())
	}
	kr.builtin = true
	return kr
}

// OpenKeyring returns the keyring for environment: the keys file at path,
// or, in local_parity only, LocalKeyring(localKey) when path is empty.
func OpenKeyring(environment, path, localKey string) (*Keyring, error) {
	if path != "" {
		return LoadKeyring(path)
	}
	if environment != event.EnvLocalParity {
		return nil, ErrNoKeysFile
	}
	return LocalKeyring(localKey), nil
}

// Builtin reports whether this is the local_parity fallback keyring.
func (k *Keyring) Builtin() bool { return k.builtin }

// Len returns the number of allowlisted keys, revoked ones included.
func (k *Keyring) Len() int { return len(k.specs) }

// admits reports whether apiKey is allowlisted and not revoked.
func (k *Keyring) admits(apiKey string) bool {
	d := HashKey(apiKey)
	_, ok := k.byHash[d]
	return ok && !k.revoked[d]
}

// Authenticate returns the principal of apiKey, or ErrMissingKey,
// ErrUnknownKey or ErrRevokedKey. Lookup is by digest, so the comparison
// never touches the secret itself.
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
		return nil, ErrRevokedKey
	}
	return p, nil
}
