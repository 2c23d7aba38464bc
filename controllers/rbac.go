package controllers

// The operator's permissions, collected by `make manifests` into config/rbac/role.yaml.
//
// controller-gen can only emit a ClusterRole. Secrets get exactly the verbs the code uses:
// get, list and watch (the cache and the live reads), create (reveal, delivery and hash
// Secrets), patch (delivery and hash Secrets) and delete (expired, claimed-over, superseded
// and replaced reveal Secrets, and hash Secrets). The leader-election Lease is granted by a
// Role in the system namespace alone (config/rbac/leader_election_role.yaml), not here.
//
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
