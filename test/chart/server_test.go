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
			cfg := serverConfig(t, render(t, tt.sets))
			if cfg.PeersAreProxies != tt.peersAreProxy {
				t.Errorf("peersAreProxies: %v, want %v", cfg.PeersAreProxies, tt.peersAreProxy)
			}
			want := int64(16777216)
			if slices.Contains(tt.sets, "server.maxInFlightBytesPerNamespace=1048576") {
				want = 1048576
			}
			if *cfg.MaxInFlightBytesPerNamespace != want || *cfg.MaxConnections != 1024 {
				t.Errorf("maxInFlightBytesPerNamespace %d, maxConnections %d; want %d, 1024", *cfg.MaxInFlightBytesPerNamespace, *cfg.MaxConnections, want)
			}
			perClient := int32(48)
			if slices.Contains(tt.sets, "server.maxConnectionsPerClient=16") {
				perClient = 16
			}
			if *cfg.MaxConnectionsPerClient != perClient {
				t.Errorf("maxConnectionsPerClient %d, want %d", *cfg.MaxConnectionsPerClient, perClient)
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

// TestHelmServerClientCertHeader: server.binding.clientCertHeader reaches the server's
// configuration; by default it reads none.
func TestHelmServerClientCertHeader(t *testing.T) {
	if got := serverConfig(t, render(t, nil)).Binding.ClientCertHeader; got != "" {
		t.Errorf("by default the server reads %q", got)
	}
	sets := []string{"server.binding.clientCertHeader=X-Forwarded-Client-Cert", "server.trustedProxies={10.1.2.3}"}
	if got := serverConfig(t, render(t, sets)).Binding.ClientCertHeader; got != "X-Forwarded-Client-Cert" {
		t.Errorf("clientCertHeader %q, want X-Forwarded-Client-Cert", got)
	}
}
