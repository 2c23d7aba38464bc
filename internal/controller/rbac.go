package controller

// The operator's permissions, collected by `make manifests` into config/rbac/role.yaml.
//
// controller-gen can only emit a ClusterRole. Every verb is one the code uses. Secrets: get,
// list and watch (the cache and the live reads), create (reveal, delivery and hash Secrets),
// patch (delivery and hash Secrets) and delete (expired, claimed-over, superseded and replaced
// reveal Secrets, and hash Secrets). APIKeys are patched (the finalizer) and their status too,
// never updated; apikeys/finalizers update is what lets the reveal and delivery Secrets name
// their APIKey as an owner that blocks deletion. Events: the reconciler's recorder writes
// events.k8s.io Events on APIKeys in every tenant namespace. The leader-election Lease, and
// the core Events its elector records on it, are granted by a Role in the system namespace
// alone (config/rbac/leader_election_role.yaml), not here. The admission webhook
// (internal/operator/keyadmission): each replica adds its certificate to the caBundle of its one
// ValidatingWebhookConfiguration, by name. LeakReports, which live in the system namespace
// alone, are read there and their status patched there, by the same Role as the Lease (the
// receiver creates them; the operator never does). Key events (internal/controller/keyjournal):
// KeyWebhooks are read everywhere (the cache lists a namespace's subscriptions); WebhookOutboxes
// and the APIKeyHistories of the system namespace are created, read and updated there, and
// histories deleted there, by that Role; the read-only copy of a key's history lives in the
// tenant's namespace, so apikeyhistories get, create and update are granted everywhere here
// (never delete: the copy goes with its APIKey, which owns it). KeyWebhooks
// (internal/controller/keywebhook) also have their status patched; their signing secrets are
// read from tenants' Secrets and copied into the system namespace, with the Secret verbs above,
// so that the webhook sender needs none outside it.
//
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys/status,verbs=patch
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeys/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=switchboard.dev,resources=keywebhooks,verbs=get;list;watch
// +kubebuilder:rbac:groups=switchboard.dev,resources=keywebhooks/status,verbs=patch
// +kubebuilder:rbac:groups=switchboard.dev,resources=apikeyhistories,verbs=get;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=switchboard-apikey-windows,verbs=get;update
