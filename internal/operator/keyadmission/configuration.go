package keyadmission

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The webhooks of the configuration: one per kind of APIKey and failure policy. The chart's
// ValidatingWebhookConfiguration is this one (test/chart compares them).
const (
	// CronWebhook checks APIKeys with a cron window, which only it can check: refused while
	// the operator is down.
	CronWebhook = "cron-windows.apikeys.switchboard.dev"
	// RenewalWebhook checks the other APIKeys that renew or have credits: their interval
	// between renewals, which the operator holds to its minimum anyway, weekly windows, which
	// CEL checks too (but not across daylight saving time changes), and credits' time zones,
	// which the server counts in UTC when it cannot load them: admitted while the operator is
	// down.
	RenewalWebhook = "renewals.apikeys.switchboard.dev"
	// PermissionsWebhook checks APIKeys whose permissions have path templates or conditions, or
	// whose credits' costs have path templates, which only it can check: refused while the
	// operator is down, since the server would refuse every request of a key whose rules do not
	// compile (and charge the most for one whose costs do not).
	PermissionsWebhook = "permissions.apikeys.switchboard.dev"
	// RoleWebhook checks the APIKeyRoles whose rules have path templates or conditions, for the
	// same reason.
	RoleWebhook = "permissions.apikeyroles.switchboard.dev"
	// PoolWebhook checks the time zone and the costs' path templates of APIKeyCreditPools'
	// credits, as RenewalWebhook does a key's: admitted while the operator is down (the server
	// counts an unknown zone in UTC, and charges the largest cost for costs it cannot compile).
	PoolWebhook = "credits.apikeycreditpools.switchboard.dev"
)

// MatchConditions send each webhook its APIKeys, by the name of the condition: those with a
// cron window, those without one that renew or have credits (renewalWindows need renewBefore
// or renewBeforePercentage, which the API server checks before any webhook), and those whose
// permissions have path templates or conditions or whose costs have path templates. APIKeys with none of these reach none.
var MatchConditions = map[string]admissionregistrationv1.MatchCondition{
	CronWebhook: {Name: "has-cron-windows", Expression: "has(object.spec.renewalWindows) && object.spec.renewalWindows.exists(w, has(w.cron))"},
	RenewalWebhook: {Name: "renews-or-counts-credits-without-cron-windows", Expression: "(has(object.spec.renewBefore) || has(object.spec.renewBeforePercentage) || has(object.spec.credits)) && " +
		"!(has(object.spec.renewalWindows) && object.spec.renewalWindows.exists(w, has(w.cron)))"},
	PermissionsWebhook: {Name: "has-path-templates-or-conditions", Expression: "has(object.spec.permissions) && object.spec.permissions.exists(r, has(r.paths) || has(r.condition)) || has(object.spec.credits) && has(object.spec.credits.costs) && object.spec.credits.costs.exists(c, has(c.paths))"},
	RoleWebhook:        {Name: "has-rule-paths-or-conditions", Expression: "has(object.spec.rules) && object.spec.rules.exists(r, has(r.paths) || has(r.condition))"},
	// The API server defaults the zone to UTC before any webhook: the others are sent.
	PoolWebhook: {Name: "has-credits-time-zone-but-utc-or-cost-paths", Expression: "has(object.spec.credits) && (has(object.spec.credits.timeZone) && object.spec.credits.timeZone != 'UTC' || has(object.spec.credits.costs) && object.spec.credits.costs.exists(c, has(c.paths)))"},
}

// Configuration is the ValidatingWebhookConfiguration name that sends APIKeys, APIKeyRoles and APIKeyCreditPools to the webhook
// at clientConfig (its caBundle left to the operator's replicas to fill).
func Configuration(name string, clientConfig admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
	webhook := func(name, resource string, policy admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            clientConfig,
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(policy),
			TimeoutSeconds:          ptr.To[int32](10),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"switchboard.dev"}, APIVersions: []string{"v1alpha1"},
					Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{MatchConditions[name]},
		}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{webhook(CronWebhook, "apikeys", admissionregistrationv1.Fail), webhook(RenewalWebhook, "apikeys", admissionregistrationv1.Ignore),
			webhook(PermissionsWebhook, "apikeys", admissionregistrationv1.Fail), webhook(RoleWebhook, "apikeyroles", admissionregistrationv1.Fail),
			webhook(PoolWebhook, "apikeycreditpools", admissionregistrationv1.Ignore)},
	}
}
