package contract

// Kafka record headers stamped by the ingest gateway from authentication.
// Consumers trust these headers, never the payload, for sender identity.
const (
	HeaderActorID    = "actor_id"    // SYSTEM::<name> or HUMAN::<id>
	HeaderSourceType = "source_type" // SYSTEM or HUMAN
	HeaderPolicyRev  = "policy_rev"  // digest of the gateway's validation and routing config
	HeaderReason     = "reason"      // on ingest.quarantine records: the Reason code
	// HeaderReroutedFrom marks a copy that a consumer moved to the
	// partition its key hashes to: "<topic>/<partition>/<offset>" of the
	// mis-partitioned original (section 1).
	HeaderReroutedFrom = "rerouted_from"
)

// Source types (the source_type header): who sent an event. An actor_id is
// the source type, "::" and a name: SYSTEM::<component> or HUMAN::<id>.
const (
	SourceSystem = "SYSTEM"
	SourceHuman  = "HUMAN"
)
