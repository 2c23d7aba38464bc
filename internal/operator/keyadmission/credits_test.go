//go:build !unit

package keyadmission_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestWebhookRefusesCreditsTimeZone: through the real API server, a key with credits (and no
// renewal, so only the credits send it to the webhook) whose timeZone has a zone's shape but
// names none is refused with a message that says so; real zones are admitted, and so is an
// update that leaves the zone alone.
func TestWebhookRefusesCreditsTimeZone(t *testing.T) {
	ns := sys.Namespace(t, "credits")
	waitForWebhook(t, ns)
	withCredits := func(name, zone string) *switchboardv1alpha1.APIKey {
		k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		k.Spec.SecretName = name + "-key"
		k.Spec.Credits = &switchboardv1alpha1.APIKeyCredits{Amount: 1000, Refill: switchboardv1alpha1.CreditsMonthly, TimeZone: zone}
		return k
	}
	tests := []struct {
		name, zone string
		want       string // the refusal; "" for admitted
	}{
		{"Paris", "Europe/Paris", ""},
		{"absent: UTC", "", ""},
		{"a zone of the right shape that does not exist", "Mars/Olympus",
			`spec.credits.timeZone: "Mars/Olympus" is not a time zone of the IANA database; name one such as UTC, Europe/Paris or America/New_York`},
		{"the operator's own zone", "Local", `spec.credits.timeZone: "Local" is not a time zone of the IANA database`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sys.Client.Create(testContext(t), withCredits("plan-"+string(rune('a'+i)), tt.zone))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a refusal with %q", err, tt.want)
			}
		})
	}
	got := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plan-a"}}
	patch := func(p string) error {
		return sys.Client.Patch(testContext(t), got, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	if err := patch(`{"spec":{"credits":{"timeZone":"Europe/Atlantis"}}}`); err == nil || !strings.Contains(err.Error(), "Europe/Atlantis") {
		t.Fatalf("changing the zone to none: %v, want a refusal", err)
	}
	if err := patch(`{"spec":{"description":"changed"}}`); err != nil {
		t.Fatalf("an update that leaves the zone alone: %v", err)
	}
}

// TestWebhookRefusesCreditPoolTimeZone: an APIKeyCreditPool's credits are held to the same zones
// as a key's: one that names none is refused, saying so (on create and on a change of the zone);
// real zones are admitted, and so is an update that leaves the zone alone.
func TestWebhookRefusesCreditPoolTimeZone(t *testing.T) {
	ns := sys.Namespace(t, "pools")
	waitForWebhook(t, ns)
	pool := func(name, zone string) *switchboardv1alpha1.APIKeyCreditPool {
		return &switchboardv1alpha1.APIKeyCreditPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: switchboardv1alpha1.APIKeyCreditPoolSpec{Credits: switchboardv1alpha1.APIKeyCredits{Amount: 1000, Refill: switchboardv1alpha1.CreditsMonthly, TimeZone: zone}}}
	}
	if err := sys.Client.Create(testContext(t), pool("paris", "Europe/Paris")); err != nil {
		t.Fatalf("a pool in Europe/Paris refused: %v", err)
	}
	const mars = `spec.credits.timeZone: "Mars/Olympus" is not a time zone of the IANA database`
	if err := sys.Client.Create(testContext(t), pool("mars", "Mars/Olympus")); err == nil || !strings.Contains(err.Error(), mars) {
		t.Fatalf("a pool on Mars: %v, want a refusal with %q", err, mars)
	}
	got := &switchboardv1alpha1.APIKeyCreditPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paris"}}
	patch := func(p string) error {
		return sys.Client.Patch(testContext(t), got, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	if err := patch(`{"spec":{"credits":{"timeZone":"Europe/Atlantis"}}}`); err == nil || !strings.Contains(err.Error(), "Europe/Atlantis") {
		t.Fatalf("changing the pool's zone to none: %v, want a refusal", err)
	}
	if err := patch(`{"spec":{"credits":{"amount":2000}}}`); err != nil {
		t.Fatalf("an update that leaves the zone alone: %v", err)
	}
}

// TestWebhookRefusesCreditCosts: a key whose costs have a path template the server could not
// parse is refused, naming the cost, and an update that leaves the costs alone is admitted.
func TestWebhookRefusesCreditCosts(t *testing.T) {
	ns := sys.Namespace(t, "costs")
	waitForWebhook(t, ns)
	withCosts := func(name string, costs ...switchboardv1alpha1.CreditCost) *switchboardv1alpha1.APIKey {
		k := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		k.Spec.SecretName = name + "-key"
		k.Spec.Credits = &switchboardv1alpha1.APIKeyCredits{Amount: 1000, Refill: switchboardv1alpha1.CreditsMonthly, Costs: costs}
		return k
	}
	good := withCosts("priced", switchboardv1alpha1.CreditCost{Credits: 10, Methods: []switchboardv1alpha1.HTTPMethod{"POST"}, Paths: []string{"/v1/connections/{id}"}})
	if err := sys.Client.Create(testContext(t), good); err != nil {
		t.Fatalf("costs with a good template refused: %v", err)
	}
	bad := withCosts("mispriced", switchboardv1alpha1.CreditCost{Credits: 1}, switchboardv1alpha1.CreditCost{Credits: 10, Paths: []string{"/v1/{id"}})
	if err := sys.Client.Create(testContext(t), bad); err == nil || !strings.Contains(err.Error(), `spec.credits.costs[1]: path "/v1/{id"`) {
		t.Fatalf("costs with a template that does not parse: %v, want a refusal naming costs[1]", err)
	}
	patch := func(p string) error {
		return sys.Client.Patch(testContext(t), good, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	if err := patch(`{"spec":{"credits":{"costs":[{"credits":3,"paths":["/v1/{"]}]}}}`); err == nil || !strings.Contains(err.Error(), "spec.credits.costs[0]") {
		t.Fatalf("changing the costs to a bad template: %v, want a refusal", err)
	}
	if err := patch(`{"spec":{"description":"changed"}}`); err != nil {
		t.Fatalf("an update that leaves the costs alone: %v", err)
	}
}
