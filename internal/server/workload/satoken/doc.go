// Package satoken verifies a Kubernetes bound ServiceAccount token presented beside an API key
// and says which workload presented it, without an API call per request: its one job is to turn
// such a token into a Workload (namespace, ServiceAccount, pod, node) or a reason to refuse it.
//
// A token is checked against the cluster's own published keys (the API server's OIDC
// discovery, read through the server's client at start and again, at most once per
// Options.RefetchInterval, when a token names a key not seen yet or the keys are older than
// Options.KeyMaxAge, so a key rotated out stops being trusted), for the audience switchboard
// is configured with, the discovery's issuer, its times on an injected clock with a small
// leeway, and its kubernetes.io claims; the pod it was issued to must still exist with the same
// UID (Pods, fed by an informer). A verified token is cached by its SHA-256 until it expires or
// Options.CacheMaxAge passes, in at most Options.MaxCached entries; a cached hit checks only the
// clock and the pod, a few map lookups.
//
// What the proof is worth: it shows that whoever presents the key can also present a token the
// cluster issued to a live pod of that ServiceAccount. It defends a key leaked alone (a commit,
// a CI log, a ticket, a copy in another pod): the key without the token is refused. It does not
// defend against whoever can read the pod's own Secrets and files: the projected token sits
// beside the key in the pod's filesystem, and whoever can read one can usually read the other
// (or exec into the pod). A stolen token is short-lived (its exp) and dies with its pod.
package satoken
