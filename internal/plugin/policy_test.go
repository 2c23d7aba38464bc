//go:build !unit

package plugin

import (
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

func TestKeyCreateWithPolicy(t *testing.T) {
	ns := env.Namespace(t, "policy")
	mustSucceed(t, admin(t, ns, "key", "create", "partner", "--timeout", "30s",
		"--rate-limit", "3/1m", "--burst", "2", "--allowed-source-ranges", "10.0.0.0/8, 2001:db8::/32", "--audiences", "billing, connections"))
	k := getAPIKey(t, ns, "partner")
	if got := keyclient.FormatRateLimit(k.Spec.RateLimit); got != "3/1m,burst=2" {
		t.Errorf("spec.rateLimit = %q, want 3/1m,burst=2", got)
	}
	if got := keyclient.FormatSourceRanges(k.Spec.AllowedSourceRanges); got != "10.0.0.0/8,2001:db8::/32" {
		t.Errorf("spec.allowedSourceRanges = %q", got)
	}
	if got := keyclient.FormatAudiences(k.Spec.Audiences); got != "billing,connections" {
		t.Errorf("spec.audiences = %q", got)
	}
	mustSucceed(t, admin(t, ns, "key", "create", "open", "--timeout", "30s"))

	r := admin(t, ns, "key", "list")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 3 || !strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "EXPIRES RATE LIMIT SOURCES AUDIENCES") {
		t.Fatalf("list:\n%s", r.stdout)
	}
	open, partner := strings.Fields(lines[1]), strings.Fields(lines[2])
	if got := strings.Join(open[len(open)-3:], " "); got != "none anywhere any" {
		t.Errorf("a key without a policy shows %q", got)
	}
	if got := strings.Join(partner[len(partner)-3:], " "); got != "3/1m,burst=2 10.0.0.0/8,2001:db8::/32 billing,connections" {
		t.Errorf("the limited key shows %q", got)
	}
}

// TestKeyCreateRefusesBadPolicies: a bad flag fails before anything is created.
func TestKeyCreateRefusesBadPolicies(t *testing.T) {
	ns := env.Namespace(t, "badpolicy")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate-limit", "100"}, `--rate-limit: rate limit "100" is not REQUESTS/PERIOD, e.g. 100/1m`},
		{[]string{"--rate-limit", "10/500ms"}, "the period must be whole seconds"},
		{[]string{"--rate-limit", "10/1m", "--burst", "11"}, "the burst must be from 1 to the rate limit's requests (10), not 11"},
		{[]string{"--burst", "5"}, "--burst needs --rate-limit"},
		{[]string{"--allowed-source-ranges", "10.0.0.1/8"}, `must be written as its network address: 10.0.0.0/8`},
		{[]string{"--allowed-source-ranges", "office"}, "is not a CIDR"},
		{[]string{"--audiences", "Billing"}, `--audiences: audience "Billing" must be written in lower case: billing`},
		{[]string{"--audiences", "connections,billing.v2"}, `audience "billing.v2" is not a DNS label: lower-case letters, digits and '-'`},
		{[]string{"--audiences", "billing", "--audiences", "billing"}, `audience "billing" is given twice`},
		{[]string{"--audiences", "any,billing"}, `"any" allows every audience and is given alone`},
	} {
		mustFail(t, admin(t, ns, append([]string{"key", "create", "bad", "--timeout", "30s"}, tt.args...)...), tt.want)
	}
	err := env.Client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "bad"}, &switchboardv1alpha1.APIKey{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left an APIKey: %v", err)
	}
}

func TestKeyPolicy(t *testing.T) {
	ns := env.Namespace(t, "setpolicy")
	created := admin(t, ns, "key", "create", "ci", "--timeout", "30s", "--allowed-source-ranges", "192.0.2.0/24")
	mustSucceed(t, created)
	hint := getAPIKey(t, ns, "ci").Status.KeyHint

	r := admin(t, ns, "key", "policy", "ci", "--rate-limit", "600/1m")
	mustSucceed(t, r)
	if want := `APIKey "ci" in namespace "` + ns + `": rate limit 600/1m, from 192.0.2.0/24, audiences any`; strings.TrimSpace(r.stdout) != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	k := getAPIKey(t, ns, "ci")
	if keyclient.FormatRateLimit(k.Spec.RateLimit) != "600/1m" || len(k.Spec.AllowedSourceRanges) != 1 || k.Status.KeyHint != hint {
		t.Errorf("after key policy: %+v, hint %s (want the same key %s)", k.Spec, k.Status.KeyHint, hint)
	}

	r = admin(t, ns, "key", "policy", "ci", "--audiences", "billing,connections,reports")
	mustSucceed(t, r)
	if want := `APIKey "ci" in namespace "` + ns + `": rate limit 600/1m, from 192.0.2.0/24, audiences billing,connections,+1`; strings.TrimSpace(r.stdout) != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	if k = getAPIKey(t, ns, "ci"); keyclient.FormatAudiences(k.Spec.Audiences) != "billing,connections,reports" || keyclient.FormatRateLimit(k.Spec.RateLimit) != "600/1m" {
		t.Errorf("after key policy --audiences: %+v", k.Spec)
	}

	mustSucceed(t, admin(t, ns, "key", "policy", "ci", "--rate-limit", "none", "--allowed-source-ranges", "any", "--audiences", "any"))
	k = getAPIKey(t, ns, "ci")
	if k.Spec.RateLimit != nil || len(k.Spec.AllowedSourceRanges) != 0 || len(k.Spec.Audiences) != 0 {
		t.Errorf("after removing the policy: %+v", k.Spec)
	}

	mustFail(t, admin(t, ns, "key", "policy", "ci"), "nothing to change")
	mustFail(t, admin(t, ns, "key", "policy", "ci", "--rate-limit", "fast"), "is not REQUESTS/PERIOD")
	mustFail(t, admin(t, ns, "key", "policy", "ci", "--audiences", "Billing"), `audience "Billing" must be written in lower case: billing`)
	mustFail(t, admin(t, ns, "key", "policy", "missing", "--rate-limit", "1/1s"), `APIKey "missing" not found`)
	reader := serviceAccountConfig(t, ns, "reader", []rbacv1.PolicyRule{rule(switchboardv1alpha1.GroupVersion.Group, []string{"apikeys"}, "get")})
	mustFail(t, run(t, reader, ns, "", "key", "policy", "ci", "--rate-limit", "1/1s"), "may not patch apikeys.switchboard.dev")
}

// TestKeyAudiences: the audiences `key create` and `key policy` set are the ones the real /v1
// server (audience "connections") checks.
func TestKeyAudiences(t *testing.T) {
	ns := env.Namespace(t, "audiences")
	created := admin(t, ns, "key", "create", "billing-sync", "--timeout", "30s", "--audiences", "billing")
	mustSucceed(t, created)
	key := strings.TrimSpace(created.stdout)
	wantCode := func(status int, code string) {
		t.Helper()
		eventuallyStatus(t, key, status)
		if _, got, err := sys.Connections(testContext(t), key); err != nil || got != code {
			t.Fatalf("GET /v1/connections: code %q, %v; want %q", got, err, code)
		}
	}
	wantCode(http.StatusForbidden, "AUDIENCE_NOT_ALLOWED")

	r := admin(t, ns, "key", "policy", "billing-sync", "--audiences", "billing,connections")
	mustSucceed(t, r)
	if !strings.HasSuffix(strings.TrimSpace(r.stdout), "audiences billing,connections") {
		t.Errorf("stdout %q", r.stdout)
	}
	wantCode(http.StatusOK, "")
	mustSucceed(t, admin(t, ns, "key", "policy", "billing-sync", "--audiences", "billing"))
	wantCode(http.StatusForbidden, "AUDIENCE_NOT_ALLOWED")
	mustSucceed(t, admin(t, ns, "key", "policy", "billing-sync", "--audiences", "any"))
	wantCode(http.StatusOK, "")
	if k := getAPIKey(t, ns, "billing-sync"); k.Spec.Audiences != nil {
		t.Errorf("--audiences any left %v", k.Spec.Audiences)
	}
	r = admin(t, ns, "key", "list")
	mustSucceed(t, r)
	if row := strings.Fields(strings.Split(r.stdout, "\n")[1]); row[len(row)-1] != "any" {
		t.Errorf("key list shows the audiences %q, want any", row[len(row)-1])
	}
}
