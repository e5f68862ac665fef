package ingest

import (
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// The gateway's identity file is package keys' keys file, which the query
// API loads too; these names keep the gateway's API.
type (
	// KeyFile is the JSON document of -ingest.keysFile.
	KeyFile = keys.KeyFile
	// KeySpec is one allowlisted API key.
	KeySpec = keys.KeySpec
	// ClientSpec maps a verified TLS client certificate to an actor.
	ClientSpec = keys.ClientSpec
	// Grant is what a key or client certificate admits.
	Grant = keys.Grant
	// Principal is an authenticated caller and what it may send.
	Principal = keys.Principal
	// Keyring is a validated allowlist.
	Keyring = keys.Keyring
)

// LocalActorID is the actor of the built-in local_parity key.
const LocalActorID = keys.LocalActorID

// Functions of package keys, under the gateway's names.
var (
	HashKey               = keys.HashKey
	NewKeyring            = keys.NewKeyring
	NewKeyringWithClients = keys.NewKeyringWithClients
	ParseKeyring          = keys.ParseKeyring
	LoadKeyring           = keys.LoadKeyring
	LocalKeyring          = keys.LocalKeyring
	OpenKeyring           = keys.OpenKeyring
	CertIdentities        = keys.CertIdentities
)
