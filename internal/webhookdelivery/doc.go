// Package webhookdelivery signs and sends one key event to one tenant endpoint in the Standard
// Webhooks format (https://www.standardwebhooks.com), safely, and says what to do next: the
// protocol half of issue 32's key events, with nothing about Kubernetes objects.
//
// Its parts:
//   - Signer signs a message with one or more "whsec_" secrets at once (rotation): the
//     webhook-signature header, "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret.
//   - Event is the payload ({"type": "apikey.leaked", "timestamp": ..., "data": {...}}), one
//     EventType per key event, each with a JSON Schema (Draft 2020-12) in schema/ that tenants
//     can validate against (Schema), and an example in example/. A payload carries a key's hint,
//     never its plaintext: NewMessage refuses a hint that is not one.
//   - Policy says which endpoints may be called: HTTPS only, never a cloud metadata endpoint
//     (169.254.169.254, fd00:ec2::254, 100.100.100.200 and the others of one list, whatever
//     the platform allows), and never an address that is loopback, link-local, unspecified,
//     multicast, Teredo or in the platform's denied networks (the cluster's Service and pod
//     CIDRs) unless the platform allows the network. IPv4-mapped IPv6 forms are judged as the
//     IPv4 address they are, and NAT64, 6to4, IPv4-compatible and IPv4-translated addresses
//     also as the IPv4 address they carry. It is enforced on the socket's actual remote
//     address, after DNS resolution, so neither a name that resolves to loopback nor DNS
//     rebinding gets through. PolicyOf reads it from the configuration's webhooks section.
//   - Sender makes one attempt (Send) with a client that takes no proxy from the environment,
//     follows no redirect (the specification counts a 3xx as a failure: the tenant updates its
//     URL; following would be a second request to a target nobody checked in advance), reads at
//     most a bounded part of the answer and gives up after a timeout. Its Result says what is
//     next: Delivered (2xx), Retry at a time (the specification's schedule for the attempt
//     number, with jitter, later if the endpoint's Retry-After asks and within the schedule's
//     longest step), Disable (410 Gone), or GiveUp after the schedule's last attempt.
//
// Who will use it (the wiring is a later step of issue 32, not done here): the component that
// sends, which needs egress to tenants' endpoints that the rest of switchboard does not; the
// operator, or a sender of its own. It reads a tenant's subscription (the endpoint, the
// event types, the signing secrets by reference to a Secret), keeps each pending event in an
// outbox in the system namespace with its webhook-id (fixed when the event is recorded, the
// same on every attempt) and its attempt number, calls Send when the attempt is due, and
// records the Result: it removes a Delivered one, reschedules at RetryAt, and on Disable or
// GiveUp writes the subscription's status (Result.Err says why, naming the endpoint by scheme
// and host only). Result.StatusCode lets it slow down an endpoint that answers 429, 502 or 504,
// as the specification recommends. Fairness between tenants (one tenant's slow endpoint
// never delays another's), the outbox's bounds and at-least-once delivery across restarts are
// the wiring's; Send takes the context that bounds a worker's attempt. Policy's fields are the
// operator configuration's (api/config/v1alpha1) to be: the networks denied (the cluster's
// ServiceCIDR objects and nodes' pod CIDRs can feed them) and allowed, and whether plain HTTP
// is.
package webhookdelivery
