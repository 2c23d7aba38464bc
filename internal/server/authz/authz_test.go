package authz

import (
	"net/http"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"

	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

func TestForwardAuthRoute(t *testing.T) {
	tests := []struct {
		path     string
		audience string
		nginx    bool
		ok       bool
	}{
		{"/authz/connections", "connections", false, true},
		{"/authz/billing-v2", "billing-v2", false, true},
		{"/authz", "", false, true},
		{"/authz/", "", false, true},
		{"/authz/nginx/connections", "connections", true, true},
		{"/authz/nginx/", "", true, true},
		{"/authz/nginx", "nginx", false, true},
		{"/authzconnections", "", false, false},
		{"/authz/Connections", "", false, false},
		{"/authz/a/b", "", false, false},
		{"/authz/nginx/a/b", "", false, false},
		{"/authz/-billing", "", false, false},
		{"/v1/connections", "", false, false},
		{"/authz/" + string(make([]byte, 64)), "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			audience, nginx, ok := forwardAuthRoute(tt.path)
			if audience != tt.audience || nginx != tt.nginx || ok != tt.ok {
				t.Errorf("forwardAuthRoute(%q) = %q, %v, %v; want %q, %v, %v", tt.path, audience, nginx, ok, tt.audience, tt.nginx, tt.ok)
			}
		})
	}
}

func TestGRPCCode(t *testing.T) {
	tests := []struct {
		status int
		want   codes.Code
	}{
		{http.StatusUnauthorized, codes.Unauthenticated},
		{http.StatusForbidden, codes.PermissionDenied},
		{http.StatusTooManyRequests, codes.ResourceExhausted},
		{http.StatusServiceUnavailable, codes.Unavailable},
	}
	for _, tt := range tests {
		if got := grpcCode(tt.status); got != tt.want {
			t.Errorf("grpcCode(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestEnvoyRateLimit(t *testing.T) {
	for _, tc := range []struct {
		requests int64
		period   time.Duration
		want     uint32
		unit     typev3.RateLimitUnit
	}{
		{100, time.Minute, 100, typev3.RateLimitUnit_MINUTE},
		{4, time.Hour, 4, typev3.RateLimitUnit_HOUR},
		{10, time.Second, 10, typev3.RateLimitUnit_SECOND},
		{1_000_000, 24 * time.Hour, 1_000_000, typev3.RateLimitUnit_DAY},
		{100, 90 * time.Second, 66, typev3.RateLimitUnit_MINUTE}, // rounded down: never more than the key
		{1, 90 * time.Second, 40, typev3.RateLimitUnit_HOUR},     // under one a minute: per hour
		{5, 2 * time.Hour, 2, typev3.RateLimitUnit_HOUR},
		{1, 2 * time.Hour, 12, typev3.RateLimitUnit_DAY},
		{1_000_000, time.Second, 1_000_000, typev3.RateLimitUnit_SECOND},
	} {
		n, unit := EnvoyRateLimit(ratelimit.Limit{Requests: tc.requests, Period: tc.period, Burst: 1})
		if n != tc.want || unit != tc.unit {
			t.Errorf("%d per %s: %d per %s, want %d per %s", tc.requests, tc.period, n, unit, tc.want, tc.unit)
		}
	}
}
