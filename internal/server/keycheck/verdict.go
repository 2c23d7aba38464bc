package keycheck

import (
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// The messages of the decision's refusals, the same whichever protocol carries them.
const (
	msgMissing            = "The Authorization header is missing or malformed: send exactly `Authorization: Bearer <API_KEY>`."
	msgInvalid            = "The API key is not valid: it is unknown, mistyped, revoked, expired, or was replaced by a rotation whose grace period has ended. Rotate the key in the panel to get a new one."
	msgNotReady           = "The server is starting and has not loaded its data yet; retry in a moment."
	msgLimited            = "Authentication failed, and too many authentications from this address have failed; retry after the number of seconds in Retry-After."
	msgAudienceNotAllowed = "This API key may not be used for this API: its audiences do not include the one this route belongs to."
)

// realm names the protection space in WWW-Authenticate (RFC 6750 section 3).
const realm = `Bearer realm="switchboard"`

// Verdict is a decision: allowed when Code is empty (Status 200), else the status and error
// code every protocol answers with. It is a value, so deciding allocates nothing; what a
// protocol needs of the key comes through its methods, never the key itself.
type Verdict struct {
	// Status is the HTTP status of the answer: 200, or 401, 403, 429 or 503.
	Status int
	// Code is the error code of a denial (internal/server/apicode); empty when allowed.
	Code string
	// Message is the error message of a denial.
	Message string
	// Challenge is the WWW-Authenticate value of a 401.
	Challenge string

	auth authOutcome
	// retryAfter is set on 429 and 503.
	retryAfter time.Duration
	// policy and result, when policy is set, are the RateLimit fields' source: every decision
	// the key's limiter made carries them, allowed or not.
	policy *ratelimit.Policy
	result ratelimit.Result
	// store is the limiter's store that decided result: where a refund goes (Checker.Settle).
	store string
	// permissionRule and permissionText, when permissionText is set, are the permissions rule
	// that refused the request.
	permissionRule string
	permissionText string
}

// PermissionRule is where and what the permissions rule that refused the request is (ok when
// one did): its index, "2 of role R" for a role's rule (permission.Decision.Where), and its text, for the protocols that carry it beside the message (ext_authz, forward-auth).
func (v *Verdict) PermissionRule() (index, text string, ok bool) {
	if v.permissionText == "" {
		return "", "", false
	}
	return v.permissionRule, v.permissionText, true
}

// Allowed says the request may pass.
func (v *Verdict) Allowed() bool { return v.Code == "" }

// Key is the key the request authenticated with (nil when it did not): what an allowed request
// may see, and whose it is.
func (v *Verdict) Key() *keyindex.Key { return v.auth.key }

// Reason says why a well-formed key was refused (unknown, revoked, expired…), for metrics and
// logs: clients see API_KEY_INVALID for all of them.
func (v *Verdict) Reason() string { return v.auth.result.String() }

// Hint is the hint of the presented key (apikey.Hint) when it was well-formed, so short and
// plain, else empty: a foreign token is never shown, not even in part.
func (v *Verdict) Hint() string {
	if v.auth.wellFormed == "" {
		return ""
	}
	return apikey.Hint(v.auth.wellFormed)
}

// RetryAfter is the Retry-After value of a 429 or 503, in whole seconds (at least 1), and
// empty when the answer has none.
func (v *Verdict) RetryAfter() string {
	if v.retryAfter <= 0 {
		return ""
	}
	return strconv.FormatInt(ratelimit.Seconds(v.retryAfter), 10)
}

// SetRateLimitHeaders writes RateLimit-Policy and RateLimit when the key's limiter decided
// the request, allowed or not.
func (v *Verdict) SetRateLimitHeaders(h http.Header) {
	if v.policy != nil {
		ratelimit.SetHeaders(h, v.policy, v.result)
	}
}

// RateLimitFields are the values of RateLimit-Policy and RateLimit (ok when the key's limiter
// decided the request), for protocols that carry header fields otherwise than in an
// http.Header (Envoy's ext_authz).
func (v *Verdict) RateLimitFields() (policy, current string, ok bool) {
	if v.policy == nil {
		return "", "", false
	}
	policy, current = ratelimit.Fields(v.policy, v.result)
	return policy, current, true
}

// SetDenialHeaders writes Retry-After and the challenge, when the verdict has them.
func (v *Verdict) SetDenialHeaders(h http.Header) {
	if ra := v.RetryAfter(); ra != "" {
		h.Set("Retry-After", ra)
	}
	if v.Challenge != "" {
		h.Set("WWW-Authenticate", v.Challenge)
	}
}
