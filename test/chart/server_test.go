//go:build !unit

package chart

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmServerMemoryAndClientAddress: the server container gets its memory limit for the Go
// runtime (a resourceFieldRef to its own limits.memory), the bound on a namespace's responses
// in flight, and --peers-are-proxies exactly when the Ingress runs without trusted proxies, so
// that keys with source ranges fail closed there.
func TestHelmServerMemoryAndClientAddress(t *testing.T) {
	tests := []struct {
		name          string
		sets          []string
		peersAreProxy bool
	}{
		{name: "defaults"},
		{name: "ingress with trusted proxies", sets: []string{"ingress.enabled=true", "server.trustedProxies={10.1.2.3}"}},
		{name: "ingress without trusted proxies", sets: []string{"ingress.enabled=true", "ingress.withoutTrustedProxies=true"}, peersAreProxy: true},
		{name: "in-flight bound set", sets: []string{"server.maxInFlightBytesPerNamespace=1048576"}},
		{name: "per-client bound set", sets: []string{"server.maxConnectionsPerClient=16"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serverContainer(t, tt.sets)
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			if got := slices.Contains(args, "--peers-are-proxies"); got != tt.peersAreProxy {
				t.Errorf("--peers-are-proxies in the args: %v, want %v (%v)", got, tt.peersAreProxy, args)
			}
			want := "--max-in-flight-bytes-per-namespace=16777216"
			if slices.Contains(tt.sets, "server.maxInFlightBytesPerNamespace=1048576") {
				want = "--max-in-flight-bytes-per-namespace=1048576"
			}
			if !slices.Contains(args, want) || !slices.Contains(args, "--max-connections=1024") {
				t.Errorf("the args lack %s or --max-connections=1024: %v", want, args)
			}
			perClient := "--max-connections-per-client=256"
			if slices.Contains(tt.sets, "server.maxConnectionsPerClient=16") {
				perClient = "--max-connections-per-client=16"
			}
			if !slices.Contains(args, perClient) {
				t.Errorf("the args lack %s: %v", perClient, args)
			}
			env, _, _ := unstructured.NestedSlice(c, "env")
			found := false
			for _, e := range env {
				m := e.(map[string]any)
				if m["name"] != "SWITCHBOARD_MEMORY_LIMIT" {
					continue
				}
				container, _, _ := unstructured.NestedString(m, "valueFrom", "resourceFieldRef", "containerName")
				resource, _, _ := unstructured.NestedString(m, "valueFrom", "resourceFieldRef", "resource")
				found = container == "server" && resource == "limits.memory"
			}
			if !found {
				t.Errorf("the server has no SWITCHBOARD_MEMORY_LIMIT from its limits.memory: %v", env)
			}
		})
	}
}
