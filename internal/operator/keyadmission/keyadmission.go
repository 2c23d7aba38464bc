// Package keyadmission is the operator's validating admission webhook for APIKeys: it refuses
// what the API server's CEL rules cannot tell, so that a key is never admitted that would end
// before it could be renewed, that would renew more often than the platform allows, or whose
// permissions the server could not compile (nor an APIKeyRole whose rules it could not):
//
//   - renewal windows of which none opens within the renewal period, for a cron expression (or
//     across daylight saving time changes) (cert-manager#9146);
//   - a lifecycle that renews a key more often than the operator's minimum interval between
//     renewals (--min-renewal-interval: internal/controller/apikey/renewalinterval), a
//     platform setting CEL does not know;
//   - a credits' time zone that is not an IANA zone (CEL checks only its shape), and costs whose
//     path templates do not parse, a key's or an APIKeyCreditPool's.
//
// The chart's ValidatingWebhookConfiguration sends it only APIKeys that renew, have credits, or
// have path templates or conditions in their permissions (matchConditions): other APIKeys never
// depend on the operator being up. Those with a cron window, path templates or conditions are
// refused while it is down (failurePolicy Fail); the others, whose weekly windows CEL checks too
// and whose renewals the operator holds to the minimum interval anyway, pass then (Ignore).
// Window checks take turns between namespaces (turns.go), so that one tenant's flood of them
// refuses only its own, at once, and never holds another's past the API server's timeout.
package keyadmission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalwindow"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// Path is where the webhook is served (it once checked renewal windows alone).
const Path = "/validate-apikey-renewal-windows"

// Validator checks an APIKey's renewal windows against its renewal period, and its renewal
// interval against the platform's minimum.
type Validator struct {
	// Clock tells the time the windows are followed from (default the real clock).
	Clock clock.PassiveClock
	// MinRenewal is the least interval between renewals a lifecycle may ask for.
	MinRenewal renewalinterval.Minimum
	decoder    admission.Decoder
	// turns let one window check run at a time, namespaces in turn (turns.go).
	turns *turns
}

// Handler returns the webhook's handler, following windows on c and holding lifecycles to
// minRenewal.
func Handler(c clock.PassiveClock, minRenewal renewalinterval.Minimum) *admission.Webhook {
	if c == nil {
		c = clock.RealClock{}
	}
	return &admission.Webhook{Handler: &Validator{Clock: c, MinRenewal: minRenewal, decoder: admission.NewDecoder(scheme.Scheme),
		turns: newTurns(checksRunning, checksPerNamespace, maxTurnWait)}}
}

// Handle admits or refuses one APIKey, APIKeyRole or APIKeyCreditPool.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	switch req.Kind.Kind {
	case "APIKeyRole":
		return v.handleRole(req)
	case "APIKeyCreditPool":
		return v.handlePool(req)
	}
	var key switchboardv1alpha1.APIKey
	if err := v.decoder.Decode(req, &key); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old switchboardv1alpha1.APIKey
	if req.Operation == admissionv1.Update {
		if err := v.decoder.DecodeRaw(req.OldObject, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if msg := creditsRefusal(&key.Spec, &old.Spec); msg != "" {
		return admission.Denied(msg)
	}
	if req.Operation == admissionv1.Update {
		// An object admitted before keeps working: only a change to the permissions, the
		// windows or the renewal period is checked (as cert-manager does), so that one admitted
		// while the operator was down can still be revoked. One stored before the minimum
		// interval was set keeps it too: the operator renews it no more often than the minimum.
		if !equality.Semantic.DeepEqual(old.Spec.Permissions, key.Spec.Permissions) {
			if msg := permissionsRefusal(permission.Compile(key.Spec.Permissions)); msg != "" {
				return admission.Denied(msg)
			}
		}
		if sameRenewal(&old.Spec, &key.Spec) {
			return admission.Allowed("")
		}
	} else if msg := permissionsRefusal(permission.Compile(key.Spec.Permissions)); msg != "" {
		return admission.Denied(msg)
	}
	if msg := v.MinRenewal.Check(&key.Spec.APIKeyLifecycle); msg != "" {
		return admission.Denied("spec.lifetime: " + msg + ": lengthen lifetime, or renew later in it (a shorter renewBefore or a smaller renewBeforePercentage)")
	}
	period := renewalinterval.Before(&key.Spec.APIKeyLifecycle)
	if len(key.Spec.RenewalWindows) == 0 || period <= 0 {
		return admission.Allowed("")
	}
	release, err := v.turns.acquire(ctx, req.Namespace)
	if errors.Is(err, errNamespaceBusy) {
		err = fmt.Errorf("%w %s; retry", err, req.Namespace)
	} else if err != nil {
		err = fmt.Errorf("%w (no turn within %s); retry", err, v.turns.maxWait)
	}
	switch {
	case err != nil && !hasCron(key.Spec.RenewalWindows):
		// Weekly windows alone come through the webhook that fails open (RenewalWebhook), and
		// CEL checked them: admitted, as they would be were the operator down.
		return admission.Allowed("").WithWarnings("spec.renewalWindows not checked across daylight saving time changes: " + err.Error())
	case errors.Is(err, errNamespaceBusy):
		return admission.Errored(http.StatusTooManyRequests, err)
	case err != nil:
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	defer release()
	if msg := renewalwindow.Check(key.Spec.RenewalWindows, period, v.Clock.Now()); msg != "" {
		return admission.Denied("spec.renewalWindows: " + msg)
	}
	return admission.Allowed("")
}

// handleRole admits or refuses an APIKeyRole: its rules must compile, as an APIKey's
// permissions must. An update that leaves them alone is admitted, as for an APIKey.
func (v *Validator) handleRole(req admission.Request) admission.Response {
	var role, old switchboardv1alpha1.APIKeyRole
	if err := v.decoder.Decode(req, &role); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		if err := v.decoder.DecodeRaw(req.OldObject, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if equality.Semantic.DeepEqual(old.Spec.Rules, role.Spec.Rules) {
			return admission.Allowed("")
		}
	}
	if msg := permissionsRefusal(permission.CompileRole(role.Name, role.Spec.Rules)); msg != "" {
		return admission.Denied(msg)
	}
	return admission.Allowed("")
}

// permissionsRefusal is why rules did not compile (err) as the server compiles them (a path
// template that does not parse, a condition that does not compile or could cost too much),
// each wrong rule named by its index; empty when they did.
func permissionsRefusal(_ *permission.Rules, err error) string {
	if err != nil {
		return "spec." + strings.ReplaceAll(err.Error(), "\n", "; spec.")
	}
	return ""
}

// hasCron says whether any of windows is a cron window, which only the webhook can check.
func hasCron(windows []switchboardv1alpha1.APIKeyRenewalWindow) bool {
	for i := range windows {
		if windows[i].Cron != "" {
			return true
		}
	}
	return false
}

func sameRenewal(a, b *switchboardv1alpha1.APIKeySpec) bool {
	return equality.Semantic.DeepEqual(a.Lifetime, b.Lifetime) && equality.Semantic.DeepEqual(a.RenewBefore, b.RenewBefore) &&
		equality.Semantic.DeepEqual(a.RenewBeforePercentage, b.RenewBeforePercentage) &&
		equality.Semantic.DeepEqual(a.RenewalWindows, b.RenewalWindows)
}
