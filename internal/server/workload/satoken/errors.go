package satoken

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// Reason is why a token was refused, in a few fixed words, fit for a metric label.
type Reason string

// The reasons a token is refused.
const (
	// ReasonMalformed: not a compact JWS of the expected shape, or claims missing or unreadable.
	ReasonMalformed Reason = "malformed"
	// ReasonBadSignature: an algorithm other than RS256 or ES256 (none and HMAC among them), or a
	// signature the named key does not verify.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonUnknownKey: the key the token names is not among the cluster's published keys,
	// even after fetching them again (or they could not be fetched).
	ReasonUnknownKey Reason = "unknown_key"
	// ReasonWrongIssuer: signed by the cluster's key for another issuer than its discovery's.
	ReasonWrongIssuer Reason = "wrong_issuer"
	// ReasonWrongAudience: not issued for switchboard's audience.
	ReasonWrongAudience Reason = "wrong_audience"
	// ReasonExpired: past its exp (with the leeway).
	ReasonExpired Reason = "expired"
	// ReasonNotYetValid: before its nbf or iat (with the leeway).
	ReasonNotYetValid Reason = "not_yet_valid"
	// ReasonNotPodBound: a ServiceAccount token not bound to a pod (a legacy Secret's token,
	// or one bound to a Secret or a Node): no pod to check it against.
	ReasonNotPodBound Reason = "not_pod_bound"
	// ReasonPodGone: the pod it was issued to no longer exists, or has another UID (recreated
	// with the same name).
	ReasonPodGone Reason = "pod_gone"
)

// Reasons lists every Reason, for metrics that initialise their label values.
var Reasons = []Reason{ReasonMalformed, ReasonBadSignature, ReasonUnknownKey, ReasonWrongIssuer,
	ReasonWrongAudience, ReasonExpired, ReasonNotYetValid, ReasonNotPodBound, ReasonPodGone}

// Error is a refused token. Its text is safe to log: it never holds the token, only the first
// hex digits of the token's SHA-256 to tell refusals of one token from another's.
type Error struct {
	Reason Reason
	// TokenHash is the first 8 hex digits of the token's SHA-256 ("-" for a token refused for
	// its size, before it is hashed).
	TokenHash string
	// Detail says more, in words of this package or from verified claims (a pod's name).
	Detail string
}

func (e *Error) Error() string {
	return "service account token " + e.TokenHash + ": " + string(e.Reason) + ": " + e.Detail
}

// ReasonOf is the Reason of err, an *Error; "" for nil or another error.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func refuse(sum *[sha256.Size]byte, reason Reason, detail string) *Error {
	return &Error{Reason: reason, TokenHash: hex.EncodeToString(sum[:4]), Detail: detail}
}
