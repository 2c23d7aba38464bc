package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a key may do, beyond being valid: how often (APIKeyRateLimit), from where (CIDR), for
// which APIs (Audience) and which requests (PermissionRule).
// The server enforces them after authentication.

// Bounds of the policy fields, as the markers below state them (markers take only literals).
// The server's limiter and the clients' parsers use these.
const (
	RateLimitMaxRequests   = 1_000_000
	RateLimitMinPeriod     = time.Second
	RateLimitMaxPeriod     = 24 * time.Hour
	MaxAllowedSourceRanges = 32
	MaxAudiences           = 16
	MaxAudienceLength      = 63
)

// APIKeyRateLimit limits a key to requests per period on average, at most burst at once, with
// GCRA: the budget comes back continuously, one request every period/requests.
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || self.burst <= self.requests",message="rateLimit.burst cannot exceed rateLimit.requests: for larger bursts raise both requests and period (10 per 1s with bursts of 100 is requests: 100, period: 10s)"
type APIKeyRateLimit struct {
	// requests is how many requests the key may make per period, from 1 to 1000000.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Requests int32 `json:"requests"`

	// period is the time the requests are counted over: whole seconds from 1s to 24h, written
	// like 30s, 1m, 1h or 1m30s.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$')",message="rateLimit.period is whole seconds written like 30s, 1m, 1h or 1m30s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+[hms])+$') || (duration(self) >= duration('1s') && duration(self) <= duration('24h'))",message="rateLimit.period must be from 1s to 24h"
	Period metav1.Duration `json:"period"`

	// burst is how many requests may come at once, from 1 to requests; requests when absent.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Burst *int32 `json:"burst,omitempty"`
}

// CIDR is a range of client addresses in CIDR notation, IPv4 or IPv6, written as its network
// address: 203.0.113.0/24, 2001:db8::/32, or 203.0.113.7/32 for one address.
// +kubebuilder:validation:MaxLength=43
// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32 (one address is 203.0.113.7/32)"
// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self) == cidr(self).masked()",message="must be written as its network address, e.g. 203.0.113.0/24 rather than 203.0.113.7/24"
type CIDR string

// Audience names an API a key may be used for: a DNS label (RFC 1123), 1 to 63 lower-case
// letters, digits and '-', starting and ending with a letter or digit, such as connections or
// billing-v2. A gateway's route names its audience in its configuration, never in a request.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="an audience is a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit, such as connections or billing-v2"
type Audience string

// ValidAudience says whether s is an Audience: what a route's audience must be, in the server's
// audience and in a forward-auth path (checked on the request path, so by hand, not with a
// regular expression).
func ValidAudience(s string) bool {
	if s == "" || len(s) > MaxAudienceLength || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '-' && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// EffectiveBurst is burst, or requests when burst is absent.
func (r *APIKeyRateLimit) EffectiveBurst() int32 {
	if r.Burst != nil {
		return *r.Burst
	}
	return r.Requests
}

// Bounds of spec.permissions (and of an APIKeyRole's rules), as the markers below state them.
// They bound what one key's rules can cost every server replica, compiled: at most 256 KiB
// (223 KiB measured at every bound, internal/apikey/permission TestLargestPermissionsAreBounded;
// it was 4.2 MiB under the first bounds), so the platform's ResourceQuota on APIKeys bounds
// what a tenant's keys cost (docs/security.md, 30).
const (
	MaxPermissionRules        = 32
	MaxPermissionPaths        = 4
	MaxPermissionPathLength   = 256
	MaxPermissionPathSegments = 16
	MaxPermissionConditions   = 8
	MaxPermissionConditionLen = 512
	MaxPermissionAudiences    = 16
	MaxPermissionSourceRanges = 32
)

// PermissionEffect is what a permission rule does to the requests it matches.
// +kubebuilder:validation:Enum=Allow;Deny
type PermissionEffect string

// The effects of a permission rule.
const (
	PermissionAllow PermissionEffect = "Allow"
	PermissionDeny  PermissionEffect = "Deny"
)

// HTTPMethod is a request method a permission rule names.
// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE;OPTIONS
type HTTPMethod string

// PermissionRule allows or denies the requests it matches: those whose method, path, audience
// and source it names (each empty means any), and for which its condition holds. A key's rules
// are read in order and the first that matches decides (internal/apikey/permission).
type PermissionRule struct {
	// effect is Allow or Deny: what the rule does to the requests it matches.
	// +required
	Effect PermissionEffect `json:"effect"`

	// methods are the request methods the rule matches (at most 7); empty or absent means any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Methods []HTTPMethod `json:"methods,omitempty"`

	// paths are the path templates the rule matches (at most 4, each at most 256 characters
	// and 16 segments, starting with "/"): a segment {name} matches any one non-empty segment, a final /**
	// matches any rest (none included), and other segments match themselves, such as
	// /v1/connections/{id} or /v1/**. Empty or absent means any path.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^/`
	Paths []string `json:"paths,omitempty"`

	// audiences are the APIs the rule matches (at most 16); empty or absent means any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Audiences []Audience `json:"audiences,omitempty"`

	// sourceRanges are the client addresses the rule matches (at most 32 CIDRs); empty or
	// absent means anywhere. Where the client's address cannot be known, an Allow rule with
	// source ranges does not match and a Deny rule does: they fail closed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	SourceRanges []CIDR `json:"sourceRanges,omitempty"`

	// condition is a CEL expression (at most 512 characters; at most 8 rules of a list have
	// one) that must be true for the rule
	// to match, over request.method, request.path, request.params (the path template's
	// captures), request.audience and request.source (the client's address, "" when unknown),
	// such as request.params.id.startsWith("conn_"). Its cost is bounded: one that could cost
	// more is refused at admission, and one that errors fails closed (an Allow rule does not
	// match, a Deny rule does).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Condition string `json:"condition,omitempty"`
}
