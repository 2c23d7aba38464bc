package server

import "testing"

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

func TestValidAudience(t *testing.T) {
	tests := []struct {
		audience string
		valid    bool
	}{
		{"connections", true}, {"a", true}, {"billing-v2", true}, {"0", true},
		{"", false}, {"-a", false}, {"a-", false}, {"A", false}, {"a.b", false}, {"a_b", false},
		{string(make([]byte, 63)), false},
	}
	for _, tt := range tests {
		if got := validAudience(tt.audience); got != tt.valid {
			t.Errorf("validAudience(%q) = %v, want %v", tt.audience, got, tt.valid)
		}
	}
	long := make([]byte, 64)
	for i := range long {
		long[i] = 'a'
	}
	if validAudience(string(long)) || !validAudience(string(long[:63])) {
		t.Error("the bound of 63 characters is not where the CRD puts it")
	}
}
