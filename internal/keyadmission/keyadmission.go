// Package keyadmission is the operator's validating admission webhook for APIKeys: it refuses
// renewal windows of which none opens within some renewal period, which the API server's CEL
// rules cannot tell for a cron expression (nor across daylight saving time changes), so that a
// key is never admitted that would end before it could be renewed (cert-manager#9146).
//
// The chart's ValidatingWebhookConfiguration sends it only APIKeys with renewal windows
// (matchConditions): APIKeys without windows never depend on the operator being up. Those with
// a cron window are refused while it is down (failurePolicy Fail); weekly windows, which CEL
// checks too, pass then (Ignore).
package keyadmission

import (
	"context"
	"errors"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/renewalwindow"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// Path is where the webhook is served.
const Path = "/validate-apikey-renewal-windows"

// Validator checks an APIKey's renewal windows against its renewal period.
type Validator struct {
	// Clock tells the time the windows are followed from (default the real clock).
	Clock   clock.PassiveClock
	decoder admission.Decoder
	// turn lets one check run at a time: a check costs up to renewalwindow's bound of calendar
	// lookups (tens of milliseconds), and any tenant may ask for as many as it likes (a dry run
	// costs it nothing), so the webhook takes at most one core from the operator's reconcilers.
	turn chan struct{}
}

// Handler returns the webhook's handler.
func Handler(c clock.PassiveClock) *admission.Webhook {
	if c == nil {
		c = clock.RealClock{}
	}
	return &admission.Webhook{Handler: &Validator{Clock: c, decoder: admission.NewDecoder(scheme.Scheme), turn: make(chan struct{}, 1)}}
}

// Handle admits or refuses one APIKey.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	var key switchboardv1alpha1.APIKey
	if err := v.decoder.Decode(req, &key); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		var old switchboardv1alpha1.APIKey
		if err := v.decoder.DecodeRaw(req.OldObject, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		// An object admitted before keeps working: only a change to the windows or the renewal
		// period is checked (as cert-manager does).
		if sameRenewal(&old.Spec, &key.Spec) {
			return admission.Allowed("")
		}
	}
	period := RenewalPeriod(&key.Spec)
	if len(key.Spec.RenewalWindows) == 0 || period <= 0 {
		return admission.Allowed("")
	}
	select {
	case v.turn <- struct{}{}:
		defer func() { <-v.turn }()
	case <-ctx.Done():
		return admission.Errored(http.StatusServiceUnavailable, errors.New("too many renewal-window checks at once: try again"))
	}
	if msg := renewalwindow.Check(key.Spec.RenewalWindows, period, v.Clock.Now()); msg != "" {
		return admission.Denied("spec.renewalWindows: " + msg)
	}
	return admission.Allowed("")
}

// RenewalPeriod is how long before a key's end its renewal falls due: renewBefore, or
// renewBeforePercentage of lifetime; 0 when neither is set.
func RenewalPeriod(spec *switchboardv1alpha1.APIKeySpec) time.Duration {
	switch {
	case spec.RenewBefore != nil:
		return spec.RenewBefore.Duration
	case spec.RenewBeforePercentage != nil && spec.Lifetime != nil:
		return spec.Lifetime.Duration * time.Duration(*spec.RenewBeforePercentage) / 100
	}
	return 0
}

func sameRenewal(a, b *switchboardv1alpha1.APIKeySpec) bool {
	return equality.Semantic.DeepEqual(a.Lifetime, b.Lifetime) && equality.Semantic.DeepEqual(a.RenewBefore, b.RenewBefore) &&
		equality.Semantic.DeepEqual(a.RenewBeforePercentage, b.RenewBeforePercentage) &&
		equality.Semantic.DeepEqual(a.RenewalWindows, b.RenewalWindows)
}
