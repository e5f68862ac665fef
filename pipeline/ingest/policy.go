package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/service"
)

// policyRevLen is the length in hex digits of a policy revision: enough to
// tell configurations apart in receipts and headers, short enough to read.
const policyRevLen = 12

// policy is the identity and validation configuration in force. A request
// takes one snapshot at admission, so all its receipts and records carry
// one policy_rev even when the keys file is reloaded meanwhile.
type policy struct {
	keys *keys.Keyring
	rev  string
}

func (g *Gateway) newPolicy(kr *keys.Keyring) *policy {
	return &policy{keys: kr, rev: policyRev(g.opts.Environment, g.opts.Topics, kr, g.opts.ClientCertAuth)}
}

// SetKeys puts a new keyring in force and returns the policy_rev it
// starts. Requests already admitted finish under the revision they began
// with; the change is audited (policy_rev_changed). A keyring the
// gateway's environment refuses (see Options) is not applied and the old
// one stays in force. An identical keyring changes nothing.
func (g *Gateway) SetKeys(kr *keys.Keyring) (string, error) {
	if err := checkKeys(g.opts.Environment, g.opts.ClientCertAuth, kr); err != nil {
		g.m.reloads.WithLabelValues("refused").Inc()
		g.audit.Error("keys refused; the previous policy stays in force", "event", "policy_reload_refused", "policy_rev", g.PolicyRev(), "err", err)
		return g.PolicyRev(), err
	}
	g.setKeysMu.Lock()
	defer g.setKeysMu.Unlock()
	old := g.pol.Load()
	next := g.newPolicy(kr)
	if next.rev == old.rev {
		g.m.reloads.WithLabelValues("unchanged").Inc()
		return old.rev, nil
	}
	g.pol.Store(next)
	g.m.reloads.WithLabelValues("applied").Inc()
	g.m.setPolicy(old.rev, next.rev)
	g.audit.Warn("policy revision changed", "event", "policy_rev_changed", "old_policy_rev", old.rev, "policy_rev", next.rev,
		"keys", len(kr.Specs()), "clients", len(kr.ClientSpecs()), "revoked", kr.Revoked())
	return next.rev, nil
}

// checkKeys applies the environment's rules to a keyring.
func checkKeys(environment string, certAuth bool, kr *keys.Keyring) error {
	if kr == nil {
		return fmt.Errorf("no key allowlist; see keys.OpenKeyring")
	}
	if err := keys.CheckEnvironment(environment, service.DefaultLocalAPIKey, kr); err != nil {
		return err
	}
	if certAuth && kr.Clients() == 0 {
		return ErrNoClientIdentities
	}
	return nil
}

// policyRev digests the validation and routing configuration in force: the
// schema version and limits, the environment, the topic names, the
// authentication mode and the allowlist (digests, identities and
// permissions). Two gateways with the same revision accept, reject and
// route the same input the same way.
func policyRev(environment string, names contract.Topics, kr *keys.Keyring, certAuth bool) string {
	doc := struct {
		SchemaVersion int               `json:"schema_version"`
		MaxEventLen   int               `json:"max_event_len"`
		MaxDepth      int               `json:"max_depth"`
		Environment   string            `json:"environment"`
		Routes        map[string]any    `json:"routes"`
		Quarantine    string            `json:"quarantine"`
		ClientCerts   bool              `json:"client_cert_auth"`
		Keys          []keys.KeySpec    `json:"keys"`
		Clients       []keys.ClientSpec `json:"clients"`
	}{
		SchemaVersion: contract.SchemaVersion,
		MaxEventLen:   contract.MaxEventLen,
		MaxDepth:      contract.MaxDepth,
		Environment:   environment,
		Routes:        map[string]any{},
		Quarantine:    names.Quarantine,
		ClientCerts:   certAuth,
		Keys:          kr.Specs(),
		Clients:       kr.ClientSpecs(),
	}
	for _, t := range contract.AllTypes {
		doc.Routes[t] = names.ForType(t)
	}
	b, err := json.Marshal(doc) // map keys are sorted, specs are sorted: canonical
	if err != nil {
		panic("BUG: policy document does not encode: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:policyRevLen]
}
