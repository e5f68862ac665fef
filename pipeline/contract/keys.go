package contract

// IdentityKey is the Kafka key of a provider resource: provider/provider_id.
func IdentityKey(provider, providerID string) string { return provider + "/" + providerID }

// NodeKey is the identity key of a node-agent heartbeat: it equals the key
// of the node's platform record (provider maas), so both land together.
func NodeKey(nodeID string) string { return IdentityKey(ProviderMAAS, nodeID) }

// UsageKey is the Kafka key of usage, rated and ledger events.
func UsageKey(meteringSource, meteringID string) string { return meteringSource + "/" + meteringID }

// KeyOf returns the Kafka key of a decoded payload (as returned by
// DecodePayload). Scan markers and the registry's events (fleet.artifact,
// fleet.policy_bundle) have no single partition: they are written to
// every partition, keyed by provider and scan id, artifact/<artifact_id>
// and bundle/<policy_bundle_id>.
func KeyOf(payload any) string {
	a, sep, b := keyParts(payload)
	return a + sep + b
}

// AppendKey appends KeyOf(payload) to dst without building a string.
func AppendKey(dst []byte, payload any) []byte {
	a, sep, b := keyParts(payload)
	return append(append(append(dst, a...), sep...), b...)
}

// KeyIs reports whether key is KeyOf(payload), without building it.
func KeyIs(key []byte, payload any) bool {
	a, sep, b := keyParts(payload)
	return len(key) == len(a)+len(sep)+len(b) && string(key[:len(a)]) == a &&
		string(key[len(a):len(a)+len(sep)]) == sep && string(key[len(a)+len(sep):]) == b
}

// keyParts is the key of payload as the parts KeyOf joins: IdentityKey,
// NodeKey or UsageKey, or the scan marker's provider/scan/scan_id.
func keyParts(payload any) (a, sep, b string) {
	switch p := payload.(type) {
	case *PlatformRecord:
		return p.Provider, "/", p.ProviderID
	case *Observation:
		return p.Provider, "/", p.ProviderID
	case *ScanCompleted:
		return p.Provider, "/scan/", p.ScanID
	case *Heartbeat:
		return ProviderMAAS, "/", p.NodeID
	case *Usage:
		return p.MeteringSource, "/", p.MeteringID
	case *Rated:
		return p.MeteringSource, "/", p.MeteringID
	case *LedgerEntry:
		return p.MeteringSource, "/", p.MeteringID
	case *Command:
		return p.Provider, "/", p.ProviderID
	case *Artifact:
		return "artifact", "/", p.ArtifactID
	case *PolicyBundle:
		return "bundle", "/", p.PolicyBundleID
	}
	panic("BUG: key of an unknown payload type")
}

// Partition returns the partition the Kafka-standard murmur2 partitioner
// picks for key among n partitions. Consumers compare it with the partition
// a record arrived on to detect mis-partitioned producers.
func Partition(key []byte, n int32) int32 {
	return int32(murmur2(key)&0x7fffffff) % n
}

// murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils).
func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		b = b[4:]
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
