//go:build !unit

package chart

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/operator/keyadmission"
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

// TestHelmMinRenewalInterval: the operator gets the minimum interval between renewals the
// values set, by default the larger of 5m and 10% of the lifetime (renewalinterval.Default);
// the cluster suite's renewal test sets a smaller one.
func TestHelmMinRenewalInterval(t *testing.T) {
	// The operator's configuration spelt as the flags that set it.
	operatorArgs := func(sets ...string) []string {
		c := operatorConfig(t, render(t, sets))
		return []string{"--min-renewal-interval=" + c.MinRenewalInterval.Duration.String(),
			fmt.Sprintf("--min-renewal-interval-percentage=%d", *c.MinRenewalIntervalPercentage)}
	}
	got := operatorArgs()
	if len(got) != 2 {
		t.Fatalf("by default the operator gets %v", got)
	}
	floor, err := time.ParseDuration(strings.TrimPrefix(got[0], "--min-renewal-interval="))
	if def := renewalinterval.Default; err != nil || floor != def.Floor || got[1] != fmt.Sprintf("--min-renewal-interval-percentage=%d", def.Percentage) {
		t.Errorf("by default the operator gets %v, want renewalinterval.Default %v", got, def)
	}
	if got, want := operatorArgs("operator.minRenewalInterval=20s", "operator.minRenewalIntervalPercentage=-1"), []string{"--min-renewal-interval=20s", "--min-renewal-interval-percentage=0"}; !slices.Equal(got, want) {
		t.Errorf("with values set the operator gets %v, want %v", got, want)
	}
}
