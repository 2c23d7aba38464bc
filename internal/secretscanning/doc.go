// Package secretscanning turns a request from GitHub's secret scanning into verified leak
// reports, each classified without a lookup, and writes GitHub's answer. It knows HTTP, GitHub's
// formats and switchboard's key format (internal/apikey); nothing about Kubernetes.
//
// GitHub reports a leaked key in one of two ways, and the package reads both:
//
//   - The secret scanning partner program
//     (https://docs.github.com/en/code-security/secret-scanning/secret-scanning-partnership-program/secret-scanning-partner-program),
//     for a provider that registered its key pattern with GitHub: a POST of a JSON array of
//     {token, type, url, source}, signed with ECDSA P-256 over the SHA-256 of the raw body
//     (headers Github-Public-Key-Identifier and Github-Public-Key-Signature), the signing keys
//     published at https://api.github.com/meta/public_keys/secret_scanning. Partner reads such
//     a request (KeySet fetches, caches and refreshes the keys); Feedback writes the answer.
//   - The secret_scanning_alert webhook of an organization that defined a custom pattern for
//     its key prefix (https://docs.github.com/en/webhooks/webhook-events-and-payloads#secret_scanning_alert),
//     signed with HMAC-SHA256 under a secret the organization chose (X-Hub-Signature-256,
//     https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries). The
//     payload names the alert but does not carry the token: AlertWebhook reads the delivery
//     and AlertClient fetches the alert's token and where it was found from GitHub's REST API
//     (https://docs.github.com/en/rest/secret-scanning/secret-scanning).
//
// Nothing is believed without a valid signature. A token of another prefix or with a bad
// checksum is a false positive, told from the format alone (apikey.Parse), so a flood of them
// costs no lookup; any other token is a candidate, known from here on only by its SHA-256
// (Report.Hash) and its hint: the plaintext does not outlive the call that read it.
//
// Identity and replays. GitHub's partner signature carries no timestamp, so a captured request
// verifies again; replay protection is idempotency. The identity of a leak is the leaked key:
// Report.Hash. The same token reported twice (in one batch, in two deliveries, from two URLs,
// or by both ways) is one leak, acted on once; a later report of it adds a place where it was
// found and changes nothing else. An organization's alert has an identity before its token is
// fetched, AlertRef.ID (repository and alert number), so a redelivered webhook need not call
// GitHub's API again.
//
// Not wired yet. The component that will use this package serves one more door of
// internal/frontdoor (an HTTP listener with its own connection bounds, body limit and rate),
// with an http.Handler that, per request: Partner.Read or AlertWebhook.Read then
// AlertClient.Fetch; records each candidate Report in the system namespace, keyed by its Hash
// (a record of its own, the only object it may create: RBAC cannot narrow a grant to one field);
// answers Feedback for the partner program, labelling true_positive the hashes of issued keys,
// and 2xx for the webhook; and maps errors with HTTPStatus. The operator then acts on the record
// (revokes or replaces the key). Its settings (the prefix, the key URL, the webhook secret and
// API token by file, the API base for GitHub Enterprise Server, the limits) will go in
// api/config/v1alpha1 next to the receiving component's.
package secretscanning
