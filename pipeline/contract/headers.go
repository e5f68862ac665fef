package contract

// Kafka record headers stamped by the ingest gateway from authentication.
// Consumers trust these headers, never the payload, for sender identity.
const (
	HeaderActorID    = "actor_id"    // SYSTEM::<name> or HUMAN::<id>
	HeaderSourceType = "source_type" // SYSTEM or HUMAN
	HeaderPolicyRev  = "policy_rev"  // digest of the gateway's validation and routing config
	HeaderReason     = "reason"      // on ingest.quarantine records: the Reason code
)

// Source types (the source_type header): who sent an event. An actor_id is
// the source type, "::" and a name: SYSTEM::<component> or HUMAN::<id>.
const (
	SourceSystem = "SYSTEM"
	SourceHuman  = "HUMAN"
)
