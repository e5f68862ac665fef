package fleet

import (
	"slices"

	"github.com/driftline/driftline/pipeline/contract"
)

// Kind is the drift injected into one provider resource. Each resource has
// exactly one kind; KindHealthy resources produce no finding.
type Kind uint8

// Drift kinds. The comment names the finding each one must produce under
// the default config (docs/drift-model.md).
const (
	KindHealthy        Kind = iota // observed every round, agreeing: no finding
	KindMissing                    // missing_provider_resource open (opened by round 0's scan marker)
	KindOrphanUnowned              // orphan_provider_resource open, no record at all
	KindOrphanReleased             // orphan_provider_resource open, record expects "released"
	KindOrphanDeleted              // orphan_provider_resource open, record version 2 is deleted
	KindStaleState                 // stale_lifecycle_state open, wrong state every round
	KindStaleVersion               // stale_lifecycle_state open, wrong version every round
	KindStaleResolved              // stale_lifecycle_state resolved, wrong state in round 0 only
	KindQuota                      // quota_or_capacity_mismatch open
	KindRoute                      // route_or_dns_mismatch open
	KindOwnerRef                   // identity_mismatch open
	numKinds
)

var kindNames = [numKinds]string{"healthy", "missing", "orphan_unowned", "orphan_released", "orphan_deleted",
	"stale_state", "stale_version", "stale_resolved", "quota", "route", "owner_ref"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// hasRecord reports whether a resource of kind k has a platform record.
func (k Kind) hasRecord() bool { return k != KindOrphanUnowned }

// observed reports whether the provider lists a resource of kind k.
func (k Kind) observed() bool { return k != KindMissing }

// owned reports whether a resource of kind k is owned (record present, not
// deleted, not absent-expecting) once its records are applied.
func (k Kind) owned() bool {
	return k != KindOrphanUnowned && k != KindOrphanReleased && k != KindOrphanDeleted
}

// active reports whether a resource of kind k is owned and observed: it
// meters usage and, for nodes, runs a node agent.
func (k Kind) active() bool { return k.owned() && k.observed() }

// NodeKind is the node-agent behaviour injected into one GPU node. Node
// kinds go only to nodes of drift kind healthy.
type NodeKind uint8

// Node-agent kinds.
const (
	NodeHealthy        NodeKind = iota // heartbeats match the record in every round
	NodeCertMismatch                   // cert_issuer_fingerprint differs from the record
	NodeClonedIdentity                 // a second host_fingerprint reports the same node_id every round
	NodeAgentOutdated                  // agent_version is older than expected_agent_version (update_path self_update)
	NodeDegraded                       // health DEGRADED, lossy high-latency link
	NodeDisconnected                   // heartbeats in round 0 only
	NodeReplaying                      // replay_required with a backlog in every round
	numNodeKinds
)

var nodeKindNames = [numNodeKinds]string{"healthy", "cert_mismatch", "cloned_identity", "agent_outdated", "degraded", "disconnected", "replaying"}

func (k NodeKind) String() string {
	if k < numNodeKinds {
		return nodeKindNames[k]
	}
	return "unknown"
}

// family describes one resource family and the provider that lists it.
type family struct {
	name          string // resource_family
	short         string // provider_id prefix
	provider      string
	recordType    string
	productID     string
	owningDomain  string
	owningPackage string
	liveState     string // expected and observed state when healthy
	staleState    string // observed state of stale kinds
	hasVersion    bool
	hasRoute      bool
	hasQuota      bool
	unit          string // usage unit
}

// families in emission order; the index is also the provider index, since
// each family has its own provider.
var families = [...]family{
	{name: contract.FamilyGPUaaS, short: "gpu", provider: contract.ProviderMAAS, recordType: "inventory_node",
		productID: "gpuaas", owningDomain: "gpuaas", owningPackage: "gpuaas/provisioning",
		liveState: "allocated", staleState: "deploying", hasVersion: true, unit: "gpu_hour"},
	{name: contract.FamilyAppRuntime, short: "app", provider: contract.ProviderAppRuntime, recordType: "app_instance",
		productID: "app-platform", owningDomain: "app-platform", owningPackage: "app-platform/runtime",
		liveState: "running", staleState: "stopped", hasVersion: true, hasRoute: true, unit: "app_vcpu_hour"},
	{name: contract.FamilyStorage, short: "vol", provider: contract.ProviderStorage, recordType: "volume",
		productID: "platform-storage", owningDomain: "storage", owningPackage: "storage/volumes",
		liveState: "attached", staleState: "detached", hasQuota: true, unit: "storage_gb_hour"},
	{name: contract.FamilyModelServing, short: "ep", provider: contract.ProviderGateway, recordType: "model_endpoint",
		productID: "token-factory", owningDomain: "token-factory", owningPackage: "token-factory/serving",
		liveState: "serving", staleState: "draining", hasVersion: true, hasRoute: true, unit: "tokens_1k"},
}

const (
	famNodes = iota
	famApps
	famVolumes
	famEndpoints
)

// applies reports whether kind k can be injected into family f.
func (f *family) applies(k Kind) bool {
	switch k {
	case KindStaleVersion:
		return f.hasVersion
	case KindQuota:
		return f.hasQuota
	case KindRoute:
		return f.hasRoute
	}
	return true
}

// domainNames are the names of the first domains; further domains are
// named "region-NN".
var domainNames = []string{"eu-west", "us-east", "ap-south", "eu-north", "us-west", "ap-east", "sa-east", "me-central"}

const maxDomains = 99

// FromNodeAgent reports whether the finding comes from node-agent evidence
// (a node kind such as cert_mismatch or cloned_identity) rather than from
// records and observations.
func (f Finding) FromNodeAgent() bool {
	return f.Provider == contract.ProviderMAAS && slices.Contains(nodeKindNames[:], f.Kind)
}

// FromFleetCore reports whether the finding is one of the fleet core's
// (authority_conflict, supply_chain_violation). Their retry_count is not
// predicted: the fleet core's rules do not say what confirms them.
func (f Finding) FromFleetCore() bool {
	return f.Classification == string(contract.ClassAuthority) || f.Classification == string(contract.ClassSupplyChain)
}
