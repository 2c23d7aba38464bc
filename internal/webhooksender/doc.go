// Package webhooksender delivers the key events waiting in the WebhookOutboxes of the system
// namespace to tenants' KeyWebhooks: `switchboard webhooks`, the one component of switchboard
// with egress to the internet.
//
// One replica at a time sends (leader election). For each message that is due it reads the
// KeyWebhook the message names (its UID must match, else the message is dropped), the copy of
// its signing secrets that the operator keeps in the signing namespace, which holds nothing
// else (internal/controller/keywebhook: the sender reads, and may read, no Secret elsewhere,
// none of the system namespace's), makes one attempt
// (webhookdelivery.Sender.Send, whose Policy refuses loopback, link-local and the platform's
// denied networks on the socket's actual address) and records the result in the outbox with
// optimistic concurrency: a delivered message is removed, a failed one gets its next attempt
// time, a 410 Gone disables the endpoint until its KeyWebhook's spec changes, the last
// attempt failed drops the message and counts it. A message leaves the outbox only once
// delivered or dropped, so a sender killed mid-delivery sends it again, with the same
// webhook-id, when the next leader starts: at least once.
//
// Fairness: at most webhooks.concurrency attempts in flight, at most
// webhooks.perNamespaceConcurrency of them for one namespace's endpoints, one per endpoint,
// and the namespaces served in turn; an endpoint that never answers holds its slot for the
// attempt timeout and no longer. Each KeyWebhook's status
// mirrors the outbox (pending, dropped, lastDeliveryTime, Ready), and nothing is decided from
// it.
package webhooksender
