package v1alpha1

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
// bound), the peer principal a mesh's mutual TLS authenticated (ext_authz, a bound SPIFFE ID),
// or a DPoP-shaped proof signed by a bound public key (the DPoP header). What the server
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
