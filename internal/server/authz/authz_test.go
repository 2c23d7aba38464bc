package authz

import (
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
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
