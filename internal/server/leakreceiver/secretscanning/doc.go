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
// Nothing is believed without a valid signature, and a request whose signature headers GitHub
// could not have sent (CheckAlertHeaders, CheckPartnerHeaders) is refused before a byte of its
// body is read: Verify checks the headers, then reads the bounded body and verifies it; Parse
// reads a verified body. A token of another prefix or with a bad
// checksum is a false positive, told from the format alone (apikey.Parse), so a flood of them
// costs no lookup; any other token is a candidate, known from here on only by its SHA-256
// (Report.Hash) and its hint: the plaintext does not outlive the call that read it.
//
// Identity and replays. GitHub's partner signature carries no timestamp, so a captured request
// verifies again; replay protection is idempotency. The identity of a leak is the leaked key:
// Report.Hash. The same token reported twice (in one batch, in two deliveries, from two URLs,
// or by both ways) is one leak, acted on once; a later report of it adds a place where it was
// found and changes nothing else. An organization's alert has an identity before its token is
// fetched, AlertRef.ID (repository and alert number, both in the signed body), so a
// redelivered webhook need not call GitHub's API again (internal/server/leakreceiver remembers
// them); X-GitHub-Delivery is not signed, and nothing is decided by it.
//
// GitHub does not deliver an organization's webhook again on its own: AlertClient.ListOpen
// lists the organization's open alerts with their secrets (paged, within a budget of
// requests), so that a leak whose delivery was lost is found all the same. A GitHub answer
// that cannot be read is ErrBadGateway, one that is an error ErrUnavailable: either way the
// delivery log shows a server error, never a bad request.
//
// Wiring. internal/server/leakreceiver serves this package on the server's "leak-reports" door
// of internal/frontdoor (its own connection bounds, body limit and rate): Partner.Read or
// AlertWebhook.Read then AlertClient.Fetch; each candidate Report whose hash the server's index
// knows is recorded as a LeakReport in the system namespace, named after its Hash (the only
// object the server may create: RBAC cannot narrow a grant to one field); Feedback answers the
// partner program, 2xx the webhook, HTTPStatus the errors. The operator acts on the record.
// Its settings are the leakReports section of the ServerConfiguration (api/config/v1alpha1).
package secretscanning
