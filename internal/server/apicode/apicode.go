// Package apicode is the error codes of switchboard's API: what a refusal says, that clients
// branch on, the same on /v1 and on a gateway's denial. The decision (internal/server/keycheck)
// answers with them and the adapters write them (internal/server/apierror, the JSON error
// object), so they live below both. They are the contract: docs/api.md has one table of them
// all and api/openapi/openapi.yaml lists them too.
package apicode

// The error codes.
const (
	APIKeyMissing    = "API_KEY_MISSING"
	APIKeyInvalid    = "API_KEY_INVALID"
	NotFound         = "NOT_FOUND"
	MethodNotAllowed = "METHOD_NOT_ALLOWED"
	InvalidParameter = "INVALID_PARAMETER"
	RateLimited      = "RATE_LIMITED"
	KeyRateLimited   = "API_KEY_RATE_LIMITED"
	SourceNotAllowed = "SOURCE_NOT_ALLOWED"
	// AudienceNotAllowed: the key's spec.audiences do not include the route's audience.
	AudienceNotAllowed = "AUDIENCE_NOT_ALLOWED"
	// PermissionDenied: the key's spec.permissions refuse the request, by a Deny rule or for want
	// of an Allow rule; the message names which.
	PermissionDenied = "API_KEY_PERMISSION_DENIED"
	// TooManyConcurrent: the namespace's responses being written on this replica already add
	// up to --max-in-flight-bytes-per-namespace (internal/server/v1api).
	TooManyConcurrent = "TOO_MANY_CONCURRENT_REQUESTS"
	// KeyCreditsExhausted: the key's spec.credits for this period are spent.
	KeyCreditsExhausted = "API_KEY_CREDITS_EXHAUSTED"
	// KeyWrongWorkload: the key's spec.binding (mode Enforce) binds it to workloads, and the
	// request proved it comes from none of them; the message never says which are bound.
	KeyWrongWorkload = "API_KEY_WRONG_WORKLOAD"
	// BodyNotAllowed: the request carried a body, which no /v1 route reads (the front door
	// refuses it before any handler, and closes the connection).
	BodyNotAllowed = "BODY_NOT_ALLOWED"
	NotReady       = "NOT_READY"
	Internal       = "INTERNAL_ERROR"
)
