package keyadmission

import (
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
)

// handlePool admits or refuses an APIKeyCreditPool: its credits' costs and time zone, as a key's.
func (v *Validator) handlePool(req admission.Request) admission.Response {
	var pool, old switchboardv1alpha1.APIKeyCreditPool
	if err := v.decoder.Decode(req, &pool); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	oldSpec := switchboardv1alpha1.APIKeySpec{}
	if req.Operation == admissionv1.Update {
		if err := v.decoder.DecodeRaw(req.OldObject, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		oldSpec.Credits = &old.Spec.Credits
	}
	if msg := creditsRefusal(&switchboardv1alpha1.APIKeySpec{Credits: &pool.Spec.Credits}, &oldSpec); msg != "" {
		return admission.Denied(msg)
	}
	return admission.Allowed("")
}

// creditsRefusal says what is wrong with spec.credits (old is the stored spec on an update,
// else empty): its costs, which the server compiles as it does permissions, or the time zone
// whose calendar the server counts in; "" when nothing is, or when the update leaves the part
// as it was: a key admitted before keeps working. The server counts a zone it cannot load in
// UTC, so a key admitted while the operator was down works too.
func creditsRefusal(spec, old *switchboardv1alpha1.APIKeySpec) string {
	c := spec.Credits
	if c == nil {
		return ""
	}
	if old.Credits == nil || !equality.Semantic.DeepEqual(old.Credits.Costs, c.Costs) {
		if _, err := permission.CompileCosts(c.Costs); err != nil {
			return "spec.credits." + err.Error()
		}
	}
	if c.TimeZone == "" || old.Credits != nil && old.Credits.TimeZone == c.TimeZone {
		return ""
	}
	// "Local" loads, but as the operator's own zone, which no key's owner can know.
	if _, err := time.LoadLocation(c.TimeZone); err != nil || c.TimeZone == "Local" {
		return fmt.Sprintf("spec.credits.timeZone: %q is not a time zone of the IANA database; name one such as UTC, Europe/Paris or America/New_York", c.TimeZone)
	}
	return ""
}
