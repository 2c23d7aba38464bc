package server

import (
	"testing"

	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
)

// The configuration's defaults are the server's parts' own, the front door's table included
// (frontdoor.Doors says why these): the server runs from the configuration alone, so a default
// changed on one side only would change nothing, or drift.
func TestConfigDefaultsAreThePartsDefaults(t *testing.T) {
	h := &host{c: &configv1alpha1.ServerConfiguration{}}
	configv1alpha1.SetDefaults_ServerConfiguration(h.c)
	api := h.apiLimits()
	for _, d := range []struct {
		name      string
		got, want int64
	}{
		{"maxConnections", int64(api.MaxConnections), int64(frontdoor.APILimits.MaxConnections)},
		{"maxConnectionsPerClient", int64(api.MaxConnectionsPerClient), int64(frontdoor.APILimits.MaxConnectionsPerClient)},
		{"authz.http.maxConnections", int64(*h.c.Authz.HTTP.MaxConnections), int64(frontdoor.ForwardAuthLimits.MaxConnections)},
		{"authz.http.maxConnectionsPerClient", int64(*h.c.Authz.HTTP.MaxConnectionsPerClient), int64(frontdoor.ForwardAuthLimits.MaxConnectionsPerClient)},
		{"authz.grpc.maxMessageBytes", int64(*h.c.Authz.GRPC.MaxMessageBytes), int64(frontdoor.DefaultGRPCLimits.MaxMessage)},
		{"rateLimitRedis.timeout", int64(h.c.RateLimitRedis.Timeout.Duration), int64(keycheck.DefaultRedisTimeout)},
	} {
		if d.got != d.want {
			t.Errorf("%s: the configuration's default is %d, the part's %d", d.name, d.got, d.want)
		}
	}
	if h.c.KeyPrefix != keycheck.DefaultKeyPrefix {
		t.Errorf("keyPrefix: the configuration's default is %q, the decision's %q", h.c.KeyPrefix, keycheck.DefaultKeyPrefix)
	}
}

// The configuration's 0 is "no bound" where the server reads it: the front door bounds nothing
// at ≤ 0.
func TestZeroBoundIsNone(t *testing.T) {
	h := &host{c: &configv1alpha1.ServerConfiguration{MaxConnections: ptr.To[int32](0), MaxConnectionsPerClient: ptr.To[int32](0), TrustedProxies: []string{"10.0.0.1"}}}
	configv1alpha1.SetDefaults_ServerConfiguration(h.c)
	if l := h.apiLimits(); l.MaxConnections != 0 || l.MaxConnectionsPerClient != 0 {
		t.Errorf("maxConnections and maxConnectionsPerClient 0: the door bounds %d and %d", l.MaxConnections, l.MaxConnectionsPerClient)
	}
}
