//go:build !unit

package chart

import (
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/switchboard-dev/switchboard/internal/keyadmission"
)

// TestWebhookConfigurationIsTheCodes: the chart's ValidatingWebhookConfiguration is
// keyadmission.Configuration pointed at the chart's Service, with the caBundle left to the
// operator; the operator is told its name, and may update that one alone.
func TestWebhookConfigurationIsTheCodes(t *testing.T) {
	objs := decode(t, mustRun(t, "template", "switchboard", chartDir(), "--namespace", releaseNamespace))
	var got *admissionregistrationv1.ValidatingWebhookConfiguration
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			got = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got == nil {
		t.Fatal("the chart renders no ValidatingWebhookConfiguration")
	}
	want := keyadmission.Configuration("switchboard-apikey-windows", admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: releaseNamespace, Name: "switchboard-webhook", Path: ptr.To(keyadmission.Path), Port: ptr.To[int32](9443)}})
	if got.Name != want.Name || !reflect.DeepEqual(got.Webhooks, want.Webhooks) {
		t.Fatalf("the chart's webhook configuration differs from keyadmission.Configuration:\n got %+v\nwant %+v", got.Webhooks, want.Webhooks)
	}
	roles := rolesOf(t, objs, "ClusterRole")
	var allowed bool
	for _, r := range roles["switchboard-operator"].Rules {
		if reflect.DeepEqual(r.Resources, []string{"validatingwebhookconfigurations"}) {
			allowed = reflect.DeepEqual(r.ResourceNames, []string{want.Name}) && reflect.DeepEqual(r.Verbs, []string{"get", "update"})
		}
	}
	if !allowed {
		t.Fatal("the operator may not update the webhook configuration by name alone (get, update)")
	}
	off := decode(t, mustRun(t, "template", "switchboard", chartDir(), "--namespace", releaseNamespace, "--set", "operator.webhook.enabled=false"))
	for _, o := range off {
		if o.GetKind() == "ValidatingWebhookConfiguration" || o.GetName() == "switchboard-webhook" {
			t.Fatalf("operator.webhook.enabled=false still renders %s %s", o.GetKind(), o.GetName())
		}
	}
}
