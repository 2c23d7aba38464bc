//go:build !unit

package chart

import (
	"testing"

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

// TestHelmRateLimitRedis: without a URL the server keeps budgets in memory (no Redis flag); with
// one, it gets the URL and timeout as flags and the password only from the Secret.
func TestHelmRateLimitRedis(t *testing.T) {
	c := serverContainer(t, nil)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	for _, a := range args {
		if len(a) > 18 && a[:18] == "--rate-limit-redis" {
			t.Errorf("by default the server has %s", a)
		}
	}

	c = serverContainer(t, []string{"server.rateLimit.redis.url=rediss://switchboard@redis.cache.svc:6380/2",
		"server.rateLimit.redis.passwordSecret.name=redis-auth", "server.rateLimit.redis.passwordSecret.key=pw", "server.rateLimit.redis.timeout=80ms"})
	args, _, _ = unstructured.NestedStringSlice(c, "args")
	want := map[string]bool{"--rate-limit-redis=rediss://switchboard@redis.cache.svc:6380/2": false, "--rate-limit-redis-timeout=80ms": false}
	for _, a := range args {
		if _, ok := want[a]; ok {
			want[a] = true
		}
	}
	for a, seen := range want {
		if !seen {
			t.Errorf("the server lacks %s (args %v)", a, args)
		}
	}
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
