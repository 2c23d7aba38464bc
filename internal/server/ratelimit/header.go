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
//
// A key with credits has a second item in each, "credits": q is its credits per period, w the
// period's length in seconds (this period's: months and DST days differ), r the credits left
// and t the seconds until the refill. A key with credits and no rate has that item alone.
//
//	RateLimit-Policy: "apikey";q=100;w=60, "credits";q=100000;w=2592000
//	RateLimit: "apikey";r=42;t=1, "credits";r=99958;t=86400
const (
	// Draft names the revision followed, for documentation and tests.
	Draft = "draft-ietf-httpapi-ratelimit-headers-11"
	// PolicyName is the name of a key's rate's policy, and CreditsPolicyName of its credits'.
	PolicyName        = "apikey"
	CreditsPolicyName = "credits"

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
	if p.Credits == nil {
		h[FieldPolicy] = p.policyField
	} else {
		h[FieldPolicy] = []string{policyField(p, res)}
	}
	h[FieldRateLimit] = []string{rateLimitField(p, res)}
}

// Fields returns the values of RateLimit-Policy and RateLimit, for protocols that carry header
// fields otherwise than in an http.Header (Envoy's ext_authz).
func Fields(p *Policy, res Result) (policy, rateLimit string) {
	return policyField(p, res), rateLimitField(p, res)
}

func policyField(p *Policy, res Result) string {
	if p.Credits == nil {
		return p.policyField[0]
	}
	b := make([]byte, 0, 80)
	if p.HasRate() {
		b = append(b, p.policyField[0]+", "...)
	}
	b = append(b, `"`+CreditsPolicyName+`";q=`...)
	b = strconv.AppendInt(b, p.Credits.Amount, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, Seconds(res.Credits.Window), 10)
	return string(b)
}

func rateLimitField(p *Policy, res Result) string {
	b := make([]byte, 0, 64)
	if p.HasRate() {
		rate := res
		// Refused for credits, the request was admitted by the rate: its t is the rate's own,
		// not the refill's Retry-After.
		rate.Allowed = rate.Allowed || rate.Credits.Exhausted
		b = append(b, `"`+PolicyName+`";r=`...)
		b = strconv.AppendInt(b, max(rate.Remaining, 0), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, Seconds(rate.NextAfter(p.Limit)), 10)
	}
	if p.Credits != nil {
		if p.HasRate() {
			b = append(b, ", "...)
		}
		b = append(b, `"`+CreditsPolicyName+`";r=`...)
		b = strconv.AppendInt(b, res.Credits.Remaining, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, Seconds(res.Credits.RefillAfter), 10)
	}
	return string(b)
}

// Seconds rounds d up to whole seconds, at least 1: for Retry-After and t, where a client that
// waits that long must find budget.
func Seconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}
