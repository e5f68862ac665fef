package ingest

import (
	"crypto/sha256"
	"encoding/hex"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/event"
	"github.com/driftline/driftline/pipeline/topics"
)

// policyRevLen is the length in hex digits of a policy revision: enough to
// tell configurations apart in receipts and headers, short enough to read.
const policyRevLen = 12

// policyRev digests the validation and routing configuration in force: the
// schema version and limits, the environment, the topic names and the key
// allowlist (digests and permissions). Two gateways with the same revision
// accept, reject and route the same input the same way.
func policyRev(environment string, names topics.Names, keys *Keyring) string {
	doc := struct {
		SchemaVersion int            `json:"schema_version"`
		MaxEventLen   int            `json:"max_event_len"`
		Environment   string         `json:"environment"`
		Routes        map[string]any `json:"routes"`
		Quarantine    string         `json:"quarantine"`
		Keys          []KeySpec      `json:"keys"`
	}{
		SchemaVersion: event.SchemaVersion,
		MaxEventLen:   event.MaxEventLen,
		Environment:   environment,
		Routes:        map[string]any{},
		Quarantine:    names.Quarantine,
		Keys:          keys.specs,
	}
	for _, t := range event.AllTypes {
		doc.Routes[t] = names.ForType(t)
	}
	b, err := json.Marshal(doc) // map keys are sorted, specs are sorted: canonical
	if err != nil {
		panic("BUG: policy document does not encode: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:policyRevLen]
}
