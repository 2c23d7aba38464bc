//go:build !unit

package keyclient_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

func TestCreateAndSetPolicy(t *testing.T) {
	ns := env.Namespace(t, "policy")
	owner := keyclient.New(identity(t, ns, "owner", ownerRules...), keyclient.Options{})
	rl, err := keyclient.ParseRateLimit("100/1m", 20)
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := keyclient.ParseSourceRanges([]string{"10.0.0.0/8", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	audiences, err := keyclient.ParseAudiences("billing, connections")
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(ns, "limited")
	keyclient.Policy{RateLimit: rl, AllowedSourceRanges: ranges, Audiences: audiences}.Apply(&key.Spec)
	issued, err := owner.Create(testContext(t), key, wait)
	if err != nil {
		t.Fatal(err)
	}
	if got := keyclient.FormatRateLimit(issued.APIKey.Spec.RateLimit); got != "100/1m,burst=20" {
		t.Errorf("created with rate limit %q", got)
	}
	if got := keyclient.FormatSourceRanges(issued.APIKey.Spec.AllowedSourceRanges); got != "10.0.0.0/8,2001:db8::/32" {
		t.Errorf("created with source ranges %q", got)
	}
	if got := keyclient.FormatAudiences(issued.APIKey.Spec.Audiences); got != "billing,connections" {
		t.Errorf("created with audiences %q", got)
	}

	reader := keyclient.New(identity(t, ns, "reader", rbacv1.PolicyRule{APIGroups: []string{switchboardv1alpha1.GroupVersion.Group}, Resources: []string{"apikeys"}, Verbs: []string{"get"}}),
		keyclient.Options{})
	var forbidden *keyclient.ForbiddenError
	if _, err := reader.SetPolicy(testContext(t), ns, "limited", func(*keyclient.Policy) {}); !errors.As(err, &forbidden) || keyclient.JoinPermissions(forbidden.Missing) != "patch apikeys.switchboard.dev" {
		t.Fatalf("set-policy without patch: %v", err)
	}

	rl, err = keyclient.ParseRateLimit("5/1s", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Only what the change edits changes: the ranges and the audiences stay.
	got, err := owner.SetPolicy(testContext(t), ns, "limited", func(p *keyclient.Policy) { p.RateLimit = rl })
	if err != nil {
		t.Fatal(err)
	}
	if keyclient.FormatRateLimit(got.Spec.RateLimit) != "5/1s" || len(got.Spec.AllowedSourceRanges) != 2 || len(got.Spec.Audiences) != 2 || got.Status.KeyHint != issued.Hint() {
		t.Errorf("after set-policy: %q, ranges %v, audiences %v, hint %s (want 5/1s, the two ranges, the two audiences, the same key %s)",
			keyclient.FormatRateLimit(got.Spec.RateLimit), got.Spec.AllowedSourceRanges, got.Spec.Audiences, got.Status.KeyHint, issued.Hint())
	}
	audiences, err = keyclient.ParseAudiences("billing-v2")
	if err != nil {
		t.Fatal(err)
	}
	got, err = owner.SetPolicy(testContext(t), ns, "limited", func(p *keyclient.Policy) { p.Audiences = audiences })
	if err != nil || keyclient.FormatAudiences(got.Spec.Audiences) != "billing-v2" || keyclient.FormatRateLimit(got.Spec.RateLimit) != "5/1s" || len(got.Spec.AllowedSourceRanges) != 2 {
		t.Errorf("changing the audiences: %v, audiences %v, rate limit %v, ranges %v", err, got.Spec.Audiences, got.Spec.RateLimit, got.Spec.AllowedSourceRanges)
	}
	got, err = owner.SetPolicy(testContext(t), ns, "limited", func(p *keyclient.Policy) { *p = keyclient.Policy{} })
	if err != nil || got.Spec.RateLimit != nil || got.Spec.AllowedSourceRanges != nil || got.Spec.Audiences != nil {
		t.Errorf("removing the policy: %v, rate limit %v, ranges %v, audiences %v", err, got.Spec.RateLimit, got.Spec.AllowedSourceRanges, got.Spec.Audiences)
	}
	if _, err := owner.SetPolicy(testContext(t), ns, "missing", func(*keyclient.Policy) {}); !apierrors.IsNotFound(err) {
		t.Errorf("set-policy of a missing key: %v", err)
	}
}

// TestParsersAgreeWithTheAPIServer: what the views' parsers accept the API server stores, and
// what they refuse (when it can be sent at all) the API server refuses too.
func TestParsersAgreeWithTheAPIServer(t *testing.T) {
	ns := env.Namespace(t, "agree")
	rates := []struct {
		rate  string
		burst int
		// spec is what a careless client would send for a rate the parser refuses.
		spec *switchboardv1alpha1.APIKeyRateLimit
	}{
		{rate: "1/1s"}, {rate: "1000000/24h", burst: 1000000}, {rate: "7/1m30s", burst: 3}, {rate: "3/3600s"},
		{rate: "0/1m", spec: &switchboardv1alpha1.APIKeyRateLimit{Requests: 0, Period: metav1.Duration{Duration: time.Minute}}},
		{rate: "2000000/1m", spec: &switchboardv1alpha1.APIKeyRateLimit{Requests: 2000000, Period: metav1.Duration{Duration: time.Minute}}},
		{rate: "1/1500ms", spec: &switchboardv1alpha1.APIKeyRateLimit{Requests: 1, Period: metav1.Duration{Duration: 1500 * time.Millisecond}}},
		{rate: "1/25h", spec: &switchboardv1alpha1.APIKeyRateLimit{Requests: 1, Period: metav1.Duration{Duration: 25 * time.Hour}}},
		{rate: "1/1s", burst: 2, spec: &switchboardv1alpha1.APIKeyRateLimit{Requests: 1, Period: metav1.Duration{Duration: time.Second}, Burst: new(int32(2))}},
	}
	for i, tt := range rates {
		rl, err := keyclient.ParseRateLimit(tt.rate, tt.burst)
		key := newKey(ns, "rate-"+string(rune('a'+i)))
		if err == nil {
			key.Spec.RateLimit = rl
		} else {
			key.Spec.RateLimit = tt.spec
		}
		apiErr := env.Client.Create(testContext(t), key)
		if (err == nil) != (apiErr == nil) {
			t.Errorf("rate %q burst %d: the parser says %v, the API server %v", tt.rate, tt.burst, err, apiErr)
		}
	}
	for i, r := range []string{"192.0.2.0/24", "2001:db8:1::/48", "0.0.0.0/0", "::/0", "198.51.100.9/32", "203.0.113.7/24", "2001:db8::1/32"} {
		ranges, err := keyclient.ParseSourceRanges([]string{r})
		key := newKey(ns, "range-"+string(rune('a'+i)))
		key.Spec.AllowedSourceRanges = []switchboardv1alpha1.CIDR{switchboardv1alpha1.CIDR(r)}
		if err == nil {
			key.Spec.AllowedSourceRanges = ranges
		}
		apiErr := env.Client.Create(testContext(t), key)
		if (err == nil) != (apiErr == nil) {
			t.Errorf("range %q: the parser says %v, the API server %v", r, err, apiErr)
		}
	}
	var seventeen []string
	for i := range 17 {
		seventeen = append(seventeen, "api-"+strconv.Itoa(i))
	}
	for i, a := range []string{"connections", "billing-v2", "0", "x1-2-3", strings.Repeat("a", 63), "a,b,c",
		"Billing", "billing.v2", "billing_v2", "-billing", "billing-", strings.Repeat("a", 64), "billing,billing", strings.Join(seventeen, ",")} {
		audiences, err := keyclient.ParseAudiences(a)
		key := newKey(ns, "audience-"+string(rune('a'+i)))
		key.Spec.Audiences = audiences
		if err != nil {
			// What a careless client would send: the text split at the commas, as it is.
			key.Spec.Audiences = nil
			for _, s := range strings.Split(a, ",") {
				key.Spec.Audiences = append(key.Spec.Audiences, switchboardv1alpha1.Audience(s))
			}
		}
		apiErr := env.Client.Create(testContext(t), key)
		if (err == nil) != (apiErr == nil) {
			t.Errorf("audiences %q: the parser says %v, the API server %v", a, err, apiErr)
		}
	}
}
