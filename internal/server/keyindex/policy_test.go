package keyindex

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

func TestPolicy(t *testing.T) {
	tests := []struct {
		name       string
		rateLimit  *switchboardv1alpha1.APIKeyRateLimit
		ranges     []switchboardv1alpha1.CIDR
		wantLimit  *ratelimit.Limit
		allowed    []string
		refused    []string
		wantErrors []string
	}{
		{
			name:    "no policy: no limiter, any address",
			allowed: []string{"192.0.2.1", "2001:db8::1", "invalid"},
		},
		{
			name:      "a rate limit without a burst has a burst of requests",
			rateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: 100, Period: metav1.Duration{Duration: time.Minute}},
			wantLimit: &ratelimit.Limit{Requests: 100, Period: time.Minute, Burst: 100},
		},
		{
			name:      "a rate limit with a burst",
			rateLimit: &switchboardv1alpha1.APIKeyRateLimit{Requests: 100, Period: metav1.Duration{Duration: time.Minute}, Burst: ptr.To[int32](5)},
			wantLimit: &ratelimit.Limit{Requests: 100, Period: time.Minute, Burst: 5},
		},
		{
			name:       "a rate limit past the schema is brought within bounds",
			rateLimit:  &switchboardv1alpha1.APIKeyRateLimit{Requests: 0, Period: metav1.Duration{Duration: 1500 * time.Millisecond}, Burst: ptr.To[int32](9)},
			wantLimit:  &ratelimit.Limit{Requests: 1, Period: time.Second, Burst: 1},
			wantErrors: []string{"rateLimit: requests must be from 1", "nearest limit"},
		},
		{
			name:    "ranges of both families, and an IPv4-mapped one",
			ranges:  []switchboardv1alpha1.CIDR{"10.0.0.0/8", "2001:db8::/32", "::ffff:192.0.2.0/120"},
			allowed: []string{"10.1.2.3", "2001:db8:5::1", "192.0.2.77"},
			refused: []string{"11.0.0.1", "2001:db9::1", "198.51.100.1", "invalid"},
		},
		{
			name:       "ranges that do not parse admit nobody",
			ranges:     []switchboardv1alpha1.CIDR{"office"},
			refused:    []string{"10.1.2.3", "2001:db8::1", "invalid"},
			wantErrors: []string{`allowedSourceRanges: "office" is not a CIDR; it admits nobody`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New()
			err := putAPIKey(x, apiKey("uid-1", func(k *switchboardv1alpha1.APIKey) {
				k.Spec.RateLimit, k.Spec.AllowedSourceRanges = tt.rateLimit, tt.ranges
			}))
			for _, want := range tt.wantErrors {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("putAPIKey error %v, want it to say %q", err, want)
				}
			}
			if len(tt.wantErrors) == 0 && err != nil {
				t.Errorf("putAPIKey: %v", err)
			}
			key := x.Keys()[0]
			switch {
			case tt.wantLimit == nil && key.RateLimit != nil:
				t.Errorf("a key without a rate limit has a policy: %+v", key.RateLimit)
			case tt.wantLimit != nil && (key.RateLimit == nil || key.RateLimit.Limit != *tt.wantLimit || !strings.HasPrefix(key.RateLimit.ID, "uid-1/")):
				t.Errorf("policy %+v, want %+v with a budget of UID uid-1", key.RateLimit, tt.wantLimit)
			}
			for _, a := range tt.allowed {
				if addr, _ := netip.ParseAddr(a); !key.AllowsSource(addr) {
					t.Errorf("%s refused, want allowed", a)
				}
			}
			for _, a := range tt.refused {
				if addr, _ := netip.ParseAddr(a); key.AllowsSource(addr) {
					t.Errorf("%s allowed, want refused", a)
				}
			}
		})
	}
}

func TestAllowsAudience(t *testing.T) {
	tests := []struct {
		name      string
		audiences []switchboardv1alpha1.Audience
		allowed   []string
		refused   []string
	}{
		{name: "no audiences: every audience", allowed: []string{"connections", "billing", ""}},
		{name: "one audience", audiences: []switchboardv1alpha1.Audience{"billing"}, allowed: []string{"billing"}, refused: []string{"connections", "billing-v2", "Billing", ""}},
		{name: "two audiences", audiences: []switchboardv1alpha1.Audience{"billing", "connections"}, allowed: []string{"billing", "connections"}, refused: []string{"search"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New()
			if err := putAPIKey(x, apiKey("uid-1", func(k *switchboardv1alpha1.APIKey) { k.Spec.Audiences = tt.audiences })); err != nil {
				t.Fatal(err)
			}
			key := x.Keys()[0]
			for _, a := range tt.allowed {
				if !key.AllowsAudience(a) {
					t.Errorf("audience %q refused, want allowed", a)
				}
			}
			for _, a := range tt.refused {
				if key.AllowsAudience(a) {
					t.Errorf("audience %q allowed, want refused", a)
				}
			}
		})
	}
}

// TestPermissionsCompiled: a key's permissions are compiled as it enters the index; none leave
// it without Rules, and rules that do not compile (written past the webhook) allow nothing.
func TestPermissionsCompiled(t *testing.T) {
	get := permission.Request{Method: "GET", Path: "/v1/connections"}
	for _, tt := range []struct {
		name        string
		rules       []switchboardv1alpha1.PermissionRule
		wantRules   bool
		wantAllowed bool
		wantError   string
	}{
		{name: "none", wantRules: false},
		{name: "rules that compile", rules: []switchboardv1alpha1.PermissionRule{{Effect: switchboardv1alpha1.PermissionAllow, Paths: []string{"/v1/**"}}},
			wantRules: true, wantAllowed: true},
		{name: "rules that do not compile allow nothing", rules: []switchboardv1alpha1.PermissionRule{
			{Effect: switchboardv1alpha1.PermissionAllow}, {Effect: switchboardv1alpha1.PermissionAllow, Condition: "request.nope"}},
			wantRules: true, wantError: "permissions[1]: condition: undeclared reference"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := New()
			err := putAPIKey(x, apiKey("uid-1", func(k *switchboardv1alpha1.APIKey) { k.Spec.Permissions = tt.rules }))
			if tt.wantError == "" && err != nil || tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError) || !strings.Contains(err.Error(), "allowed nothing")) {
				t.Fatalf("putAPIKey: %v, want %q", err, tt.wantError)
			}
			rules := x.Keys()[0].Permissions
			if (rules != nil) != tt.wantRules {
				t.Fatalf("Permissions %v, want some: %v", rules, tt.wantRules)
			}
			if rules != nil && rules.Decide(get).Allowed != tt.wantAllowed {
				t.Errorf("GET /v1/connections allowed: %v, want %v", !tt.wantAllowed, tt.wantAllowed)
			}
		})
	}
}
