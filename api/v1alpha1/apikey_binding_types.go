package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BindingMode is what a binding does to a request that does not prove it comes from a bound
// workload.
// +kubebuilder:validation:Enum=ReportOnly;Enforce
type BindingMode string

// The modes of a binding.
const (
	// BindingReportOnly admits the request, and counts and reports it (a rollout's first step).
	BindingReportOnly BindingMode = "ReportOnly"
	// BindingEnforce refuses the request with 403 API_KEY_WRONG_WORKLOAD.
	BindingEnforce BindingMode = "Enforce"
)

// Bounds of a binding's lists.
const (
	MaxBindingServiceAccounts = 16
	MaxBindingSPIFFEIDs       = 16
	MaxBindingPublicKeys      = 4
)

// APIKeyBinding names the workloads that may present a key. A request proves who presents it
// with one of: a projected ServiceAccount token of switchboard's audience in the
// Switchboard-Workload-Token header (a pod of the key's namespace whose ServiceAccount is
// bound), the peer principal a mesh's mutual TLS authenticated (a bound SPIFFE ID: ext_authz's,
// or an edge proxy's client-certificate header the server is configured to read from its
// trusted proxies), or a DPoP-shaped proof signed by a bound public key (the DPoP header). What the server
// enforces is what the operator recorded in the key's record in its own namespace, never what
// a tenant writes elsewhere.
// +kubebuilder:validation:XValidation:rule="(has(self.consumers) && self.consumers) || has(self.serviceAccounts) || has(self.spiffeIDs) || has(self.publicKeys)",message="binding names no workload: set consumers, serviceAccounts, spiffeIDs or publicKeys"
type APIKeyBinding struct {
	// mode is ReportOnly (requests that prove no bound workload are admitted, counted and
	// reported) or Enforce (they are refused with 403 API_KEY_WRONG_WORKLOAD).
	// +required
	Mode BindingMode `json:"mode"`

	// consumers binds the key to the ServiceAccounts of the pods of its namespace that read its
	// delivery Secret (spec.delivery), as the operator finds them: a new consumer Deployment
	// may use the key once its pod runs.
	// +optional
	Consumers bool `json:"consumers,omitempty"`

	// serviceAccounts are ServiceAccounts of the key's namespace (at most 16) whose pods may
	// present the key.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`

	// spiffeIDs are the SPIFFE IDs (at most 16, each at most 256 characters) a mesh's mutual TLS
	// may authenticate as the presenter, such as spiffe://cluster.local/ns/shop/sa/checkout.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^spiffe://[a-z0-9._-]+(/[A-Za-z0-9._~%!$&'()*+,;=:@-]+)*$`
	SPIFFEIDs []string `json:"spiffeIDs,omitempty"`

	// publicKeys are the RFC 7638 JWK SHA-256 thumbprints (base64url, 43 characters; at most 4)
	// of the keys whose DPoP-shaped proofs may present the key, for clients outside the cluster.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MinLength=43
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_-]{43}$`
	PublicKeys []string `json:"publicKeys,omitempty"`
}

// Bounds of status.binding: its presenters, and a presenter's principal.
const (
	MaxBindingPresenters      = 8
	MaxBindingPrincipalLength = 320
)

// APIKeyBindingStatus is who presented a bound key lately, as one server replica counted since
// it started (the replica that wrote it last): enough to turn enforcement on knowing what it
// would refuse.
type APIKeyBindingStatus struct {
	// presenters are the presenters seen most recently (at most 8), bound or not.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Presenters []BindingPresenter `json:"presenters,omitempty"`

	// misuses counts the requests that proved no bound workload.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Misuses int64 `json:"misuses,omitempty"`

	// lastMisuseAt is when the last of them was seen.
	// +optional
	LastMisuseAt *metav1.Time `json:"lastMisuseAt,omitempty"`

	// observedAt is when the server read the counts.
	// +required
	ObservedAt metav1.Time `json:"observedAt"`
}

// BindingPresenter is one presenter of a key: who proved it was (or that it proved nothing),
// from where, and whether the binding allows it.
type BindingPresenter struct {
	// principal is who the request proved it came from: system:serviceaccount:NS:NAME (a
	// ServiceAccount token), a SPIFFE ID (a mesh's peer), jwk:THUMBPRINT (a DPoP-shaped proof),
	// or "" when it proved nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	Principal string `json:"principal,omitempty"`

	// address is the client's address, as the server knows it ("" when it cannot).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Address string `json:"address,omitempty"`

	// bound says the binding allows this presenter.
	// +required
	Bound bool `json:"bound"`

	// requests counts its requests.
	// +required
	// +kubebuilder:validation:Minimum=0
	Requests int64 `json:"requests"`

	// lastSeen is when its last request was seen.
	// +required
	LastSeen metav1.Time `json:"lastSeen"`
}

// ConditionWorkloadBinding says whether the binding the API server enforces for a key (the
// record the operator resolves from spec.binding) is what spec.binding asks for; absent for a
// key without spec.binding.
const ConditionWorkloadBinding = "WorkloadBinding"

// The reasons of ConditionWorkloadBinding.
const (
	// ReasonBindingRecorded (True): the record holds every workload spec.binding names.
	ReasonBindingRecorded = "Recorded"
	// ReasonBindingPending (False): the record is not written yet (no key issued, or a change
	// not yet written).
	ReasonBindingPending = "Pending"
	// ReasonConsumersNotReadable (False): switchboard may not read the pods of the key's
	// namespace, so the record holds no consumer's ServiceAccount.
	ReasonConsumersNotReadable = "ConsumersNotReadable"
	// ReasonBindingBounded (False): more ServiceAccounts than a record holds; the first ones,
	// sorted, are recorded.
	ReasonBindingBounded = "ServiceAccountsBounded"
	// ReasonConsumersNotDelivered (False): spec.binding.consumers, but the key is revealed, not
	// delivered into a Secret (spec.secretName): no pod can be found to read it.
	ReasonConsumersNotDelivered = "NotDelivered"
)
