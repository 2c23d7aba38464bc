package ratelimit

import (
	"net/http"
	"strconv"
	"time"
)

// The RateLimit header fields follow draft-ietf-httpapi-ratelimit-headers-11 (23 May 2026), the
// latest revision of the IETF HTTPAPI working group's draft: two Structured Fields (RFC 9651)
// lists, one item each, both naming the policy "apikey":
//
//	RateLimit-Policy: "apikey";q=100;w=60
//	RateLimit: "apikey";r=42;t=1
//
// q is the key's requests, w its period in seconds; a burst other than q is the vendor
// parameter switchboard-burst (the draft's advice for service-specific parameters). r is how
// many requests the key could make at once now, and t how many seconds until it regains one
// more: GCRA returns budget continuously, one request every w/q seconds, so that is when
// "additional quota is made available". On a 429, t equals Retry-After, as the draft asks
// (Retry-After never earlier than t). Seconds are rounded up, so waiting t seconds is enough.
const (
	// Draft names the revision followed, for documentation and tests.
	Draft = "draft-ietf-httpapi-ratelimit-headers-11"
	// PolicyName is the name of the one policy a key has.
	PolicyName = "apikey"

	// FieldPolicy and FieldRateLimit are the fields' names in Go's canonical form, the keys of
	// an http.Header ("RateLimit-Policy" in the draft: field names are case-insensitive).
	FieldPolicy    = "Ratelimit-Policy"
	FieldRateLimit = "Ratelimit"
)

func formatPolicy(l Limit) string {
	b := make([]byte, 0, 48)
	b = append(b, `"`+PolicyName+`";q=`...)
	b = strconv.AppendInt(b, l.Requests, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, int64(l.Period/time.Second), 10)
	if l.Burst != l.Requests {
		b = append(b, ";switchboard-burst="...)
		b = strconv.AppendInt(b, l.Burst, 10)
	}
	return string(b)
}

// SetHeaders writes the RateLimit-Policy and RateLimit fields of a request of p's key that got
// res.
func SetHeaders(h http.Header, p *Policy, res Result) {
	h[FieldPolicy] = p.policyField
	h[FieldRateLimit] = []string{rateLimitField(p, res)}
}

// Fields returns the values of RateLimit-Policy and RateLimit, for protocols that carry header
// fields otherwise than in an http.Header (Envoy's ext_authz).
func Fields(p *Policy, res Result) (policy, rateLimit string) {
	return p.policyField[0], rateLimitField(p, res)
}

func rateLimitField(p *Policy, res Result) string {
	b := make([]byte, 0, 32)
	b = append(b, `"`+PolicyName+`";r=`...)
	b = strconv.AppendInt(b, max(res.Remaining, 0), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, Seconds(res.NextAfter(p.Limit)), 10)
	return string(b)
}

// Seconds rounds d up to whole seconds, at least 1: for Retry-After and t, where a client that
// waits that long must find budget.
func Seconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}
