package v1api

import (
	"net/http"
	"testing"
)

// TestRoutes: a path's route, its label and what it allows, from the one table.
func TestRoutes(t *testing.T) {
	tests := []struct {
		path, method string
		rt           route
		label        string
		v1, allows   bool
	}{
		{"/v1/connections", http.MethodGet, routeIDConnections, "/v1/connections", true, true},
		{"/v1/connections", http.MethodHead, routeIDConnections, "/v1/connections", true, true},
		{"/v1/connections", http.MethodPost, routeIDConnections, "/v1/connections", true, false},
		{"/v1/connections/x", http.MethodGet, routeIDV1Other, "/v1/*", true, false},
		{"/v1", http.MethodGet, routeIDV1Other, "/v1/*", true, false},
		{"/openapi.yaml", http.MethodGet, routeIDOpenAPI, "/openapi.yaml", false, true},
		{"/openapi.yaml", http.MethodDelete, routeIDOpenAPI, "/openapi.yaml", false, false},
		{"/", http.MethodGet, routeIDOther, "other", false, false},
		{"/V1/connections", http.MethodGet, routeIDOther, "other", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rt := routeOf(tt.path)
			spec := routes[rt]
			if rt != tt.rt || spec.label != tt.label || spec.v1 != tt.v1 || spec.allows(tt.method) != tt.allows {
				t.Fatalf("route %d %+v allows %t; want %d label %s v1 %t allows %t", rt, spec, spec.allows(tt.method), tt.rt, tt.label, tt.v1, tt.allows)
			}
		})
	}
}
