//go:build !unit

package chart

import "testing"

// TestHelmCreditReplicas: the replicas sharing credits decided in memory follow the server's
// replica count, or the autoscaler's maximum when it is on, so that as many replicas as may run
// never admit more than a key's credits; the failure mode is passed as set, Refuse by default
// (TestHelmRejectsBadValues refuses any other).
func TestHelmCreditReplicas(t *testing.T) {
	for _, c := range []struct {
		name         string
		sets         []string
		wantReplicas int32
		wantMode     string
	}{
		{"defaults", nil, 2, "Refuse"},
		{"5 replicas", []string{"server.replicas=5"}, 5, "Refuse"},
		{"autoscaling", []string{"server.replicas=5", "server.autoscaling.enabled=true", "server.autoscaling.maxReplicas=12"}, 12, "Refuse"},
		{"counted in memory", []string{"server.rateLimit.credits.onRedisFailure=CountInMemory"}, 2, "CountInMemory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cr := serverConfig(t, render(t, c.sets)).RateLimitCredits
			if cr.Replicas == nil || *cr.Replicas != c.wantReplicas || cr.OnRedisFailure != c.wantMode {
				t.Errorf("rateLimitCredits %+v (replicas %v), want %d replicas, %s", cr, derefOr(cr.Replicas), c.wantReplicas, c.wantMode)
			}
		})
	}
}

func derefOr(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}
