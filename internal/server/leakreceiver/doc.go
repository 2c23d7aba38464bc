// Package leakreceiver receives GitHub's secret scanning reports of leaked keys and records
// each, once, as a LeakReport in the system namespace: the one thing it does, and the only
// object the server may create. Reading and verifying GitHub's two formats is
// its package secretscanning's; acting on the record (refusing the key, replacing it) is the
// operator's.
//
// Routes, on a listener of their own (the "leak-reports" door of internal/frontdoor):
//
//   - POST /github/secret-scanning: the secret scanning partner program. The request is verified
//     (ECDSA, GitHub's published keys), each reported token classified from its format, and the
//     hashes the key index knows (a current key, or a previous one still in the index) recorded;
//     the answer is GitHub's feedback, true_positive for the recorded ones.
//   - POST /github/alerts: an organization's secret_scanning_alert webhook. The delivery is
//     verified (X-Hub-Signature-256), the alert's token fetched from GitHub's REST API, and its
//     hash recorded if the index knows it; the answer is 200 with what was done.
//
// The record is named after the key's hash (v1alpha1.LeakReportName), so a report received
// twice, by either route or by two replicas, is one record: the create's AlreadyExists is the
// idempotency GitHub's unsigned-timestamp partner format needs.
//
// GitHub is heard first, whatever strangers send (budgets.go). The signature headers are
// checked before a byte of the body is read; a request without a valid signature spends its
// client address's budget alone, and one from an address that spent it is answered 429 before
// its body; the shared rate is taken only by verified requests that need a call (to GitHub's
// REST API or the API server). What verified requests handled is remembered, so a replay, or
// GitHub's own redelivery, is answered as before with no call.
//
// GitHub does not deliver a failed organization webhook again: the catch-up (catchup.go) lists
// the organization's open alerts every period, within a budget of requests, on one replica at a
// time (a Lease), and records what was missed by the same path as the webhook.
package leakreceiver
