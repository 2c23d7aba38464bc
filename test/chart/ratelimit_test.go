//go:build !unit

package chart

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// serverContainer renders the chart with sets and returns the server container.
func serverContainer(t *testing.T, sets []string) map[string]any {
	t.Helper()
	out, err := run(t, testenv.Helm(t), append([]string{"template", "switchboard", chartDir(), "--namespace", releaseNamespace}, setArgs(sets)...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decode(t, out) {
		if o.GetKind() != "Deployment" || o.GetName() != "switchboard-server" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		return containers[0].(map[string]any)
	}
	t.Fatal("no server Deployment")
	return nil
}

// TestHelmRateLimitRedis: without a URL the server keeps budgets in memory (no Redis in its
// configuration); with one, its configuration gets the URL and timeout, and the password comes
// only from the Secret.
func TestHelmRateLimitRedis(t *testing.T) {
	if c := serverConfig(t, render(t, nil)); c.RateLimitRedis.URL != "" {
		t.Errorf("by default the server uses Redis %s", c.RateLimitRedis.URL)
	}

	sets := []string{"server.rateLimit.redis.url=rediss://switchboard@redis.cache.svc:6380/2",
		"server.rateLimit.redis.passwordSecret.name=redis-auth", "server.rateLimit.redis.passwordSecret.key=pw", "server.rateLimit.redis.timeout=80ms"}
	if r := serverConfig(t, render(t, sets)).RateLimitRedis; r.URL != "rediss://switchboard@redis.cache.svc:6380/2" || r.Timeout.Duration != 80*time.Millisecond {
		t.Errorf("the server's Redis: %+v", r)
	}
	c := serverContainer(t, sets)
	env, _, _ := unstructured.NestedSlice(c, "env")
	found := false
	for _, e := range env {
		m := e.(map[string]any)
		if m["name"] != "SWITCHBOARD_RATE_LIMIT_REDIS_PASSWORD" {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "valueFrom", "secretKeyRef", "name")
		key, _, _ := unstructured.NestedString(m, "valueFrom", "secretKeyRef", "key")
		found = name == "redis-auth" && key == "pw" && m["value"] == nil
	}
	if !found {
		t.Errorf("the password is not taken from Secret redis-auth, key pw: env %v", env)
	}
}
