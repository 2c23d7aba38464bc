//go:build !unit

package v1alpha1_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestCreditPoolValidation: a pool's credits are checked as a key's (UTC when no zone is given,
// the same bounds and rules); a pool needs its credits; a key names a pool by a bounded
// Kubernetes name, and never beside credits of its own.
func TestCreditPoolValidation(t *testing.T) {
	ns := env.Namespace(t, "pools")
	pool := &switchboardv1alpha1.APIKeyCreditPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Spec: switchboardv1alpha1.APIKeyCreditPoolSpec{Credits: switchboardv1alpha1.APIKeyCredits{Amount: 100_000, Refill: switchboardv1alpha1.CreditsMonthly}}}
	if err := env.Client.Create(ctx(t), pool); err != nil {
		t.Fatalf("creating a pool: %v", err)
	}
	var got switchboardv1alpha1.APIKeyCreditPool
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(pool), &got); err != nil {
		t.Fatal(err)
	}
	if c := got.Spec.Credits; c.Amount != 100_000 || c.TimeZone != "UTC" {
		t.Fatalf("the pool's credits did not round-trip with UTC: %+v", c)
	}
	if err := env.Client.Create(ctx(t), &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "member"},
		Spec: switchboardv1alpha1.APIKeySpec{CreditPool: "team"}}); err != nil {
		t.Fatalf("creating a key of the pool: %v", err)
	}

	invalid := func(t *testing.T, obj client.Object, wants ...string) {
		t.Helper()
		err := env.Client.Create(ctx(t), obj)
		if !apierrors.IsInvalid(err) {
			t.Fatalf("want an Invalid error, got %v", err)
		}
		for _, want := range wants {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	poolOf := func(name string, c switchboardv1alpha1.APIKeyCredits) *switchboardv1alpha1.APIKeyCreditPool {
		return &switchboardv1alpha1.APIKeyCreditPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: switchboardv1alpha1.APIKeyCreditPoolSpec{Credits: c}}
	}
	keyOf := func(name string, spec switchboardv1alpha1.APIKeySpec) *switchboardv1alpha1.APIKey {
		return &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	}
	t.Run("a pool without credits", func(t *testing.T) {
		invalid(t, poolOf("empty", switchboardv1alpha1.APIKeyCredits{}), "spec.credits.amount", "spec.credits.refill")
	})
	t.Run("a pool over 2^40", func(t *testing.T) {
		invalid(t, poolOf("huge", switchboardv1alpha1.APIKeyCredits{Amount: 1<<40 + 1, Refill: switchboardv1alpha1.CreditsDaily}), "spec.credits.amount", "less than or equal to 1099511627776")
	})
	t.Run("a pool's weekday on a monthly refill", func(t *testing.T) {
		invalid(t, poolOf("friday", switchboardv1alpha1.APIKeyCredits{Amount: 1, Refill: switchboardv1alpha1.CreditsMonthly, Weekday: "Friday"}), "credits.weekday is only for refill: Weekly")
	})
	t.Run("a key with credits and a pool", func(t *testing.T) {
		invalid(t, keyOf("both", switchboardv1alpha1.APIKeySpec{CreditPool: "team",
			Credits: &switchboardv1alpha1.APIKeyCredits{Amount: 1, Refill: switchboardv1alpha1.CreditsDaily}}), "spec", "a key spends either its own credits or a creditPool's, not both")
	})
	t.Run("a pool's name too long", func(t *testing.T) {
		invalid(t, keyOf("long", switchboardv1alpha1.APIKeySpec{CreditPool: strings.Repeat("a", 254)}), "spec.creditPool", "253")
	})
	t.Run("a pool's name that is no name", func(t *testing.T) {
		invalid(t, keyOf("other-ns", switchboardv1alpha1.APIKeySpec{CreditPool: "other/team"}), "spec.creditPool", "should match")
	})
}
