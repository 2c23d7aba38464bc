//go:build !unit

package apikey_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestAPIKeySecretNameMovedToForeignSecret: spec.secretName of a delivered key is changed to a
// Secret that exists and is not the key's. The operator does not touch it and says so
// (Ready=False DeliveryConflict, naming the Secret) instead of reporting the key as delivered
// where it is not; the key itself keeps working. Once that Secret is deleted, a key is
// delivered into it.
func TestAPIKeySecretNameMovedToForeignSecret(t *testing.T) {
	kt := newKeyTest(t)
	key := kt.waitIssued(kt.create("moved", func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "moved-key" }), 1)
	delivery, err := kt.secret("moved-key")
	if err != nil {
		t.Fatal(err)
	}
	first := plaintextOf(t, delivery)
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kt.ns, Name: "app-config"},
		StringData: map[string]string{"apiKey": "mine"},
	}
	if err := env.Client.Create(testCtx(t), foreign); err != nil {
		t.Fatal(err)
	}
	kt.patchSpec(key, func(k *switchboardv1alpha1.APIKey) { k.Spec.SecretName = "app-config" })
	got := kt.waitFor(key, "Ready=False DeliveryConflict", func(k *switchboardv1alpha1.APIKey) error {
		return hasCondition(k.Status.Conditions, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse, switchboardv1alpha1.ReasonDeliveryConflict)
	})
	if c, _ := condition(got.Status.Conditions, switchboardv1alpha1.ConditionReady); !strings.Contains(c.Message, "app-config") {
		t.Fatalf("the condition does not name the Secret: %q", c.Message)
	}
	kt.waitEvent(key, switchboardv1alpha1.ReasonDeliveryConflict, "app-config")
	after, err := kt.secret("app-config")
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Data["apiKey"]) != "mine" {
		t.Fatal("switchboard overwrote a Secret it does not manage")
	}
	if got.Status.KeyGeneration != 1 || string(kt.mustHash(got).Data[keysecret.DataHash]) != apikey.Sum(first).String() {
		t.Fatal("the key in use was replaced")
	}

	if err := env.Client.Delete(testCtx(t), after); err != nil {
		t.Fatal(err)
	}
	poke(t, got)
	got = kt.waitIssued(key, 2)
	delivered, err := kt.secret("app-config")
	if err != nil {
		t.Fatal(err)
	}
	if second := plaintextOf(t, delivered); string(kt.mustHash(got).Data[keysecret.DataHash]) != apikey.Sum(second).String() {
		t.Fatalf("Secret app-config does not hold the hashed key of generation %d", got.Status.KeyGeneration)
	}
}
