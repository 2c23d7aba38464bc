package controllers

// The operator's permissions, collected by `make manifests` into config/rbac/role.yaml.
//
// controller-gen can only emit a ClusterRole, so Secrets appear there with full access in every
// namespace. The operator needs less: full access to Secrets only in the system namespace (hash
// Secrets), and get/list/watch/create/patch/delete of its own reveal and delivery Secrets in
// tenant namespaces. The Helm chart (owned by the packaging issue, issue 6) narrows Secret
// write access to the system namespace with a Role there; config/rbac is the upper bound.
//
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
