package keyadmission

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/renewalinterval"
)

// TestOneCheckAtATime: while a check runs, another waits for its turn, and gives up with a
// 503 when its request ends first; once the turn is free it is checked.
func TestOneCheckAtATime(t *testing.T) {
	wh := Handler(clocktesting.NewFakePassiveClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)), renewalinterval.Default)
	v := wh.Handler.(*Validator)
	key := switchboardv1alpha1.APIKey{TypeMeta: metav1.TypeMeta{APIVersion: "switchboard.dev/v1alpha1", Kind: "APIKey"},
		ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "t"}}
	key.Spec.RenewBefore = &metav1.Duration{Duration: time.Hour}
	key.Spec.RenewalWindows = []switchboardv1alpha1.APIKeyRenewalWindow{{Cron: "0 0 * * *", Duration: metav1.Duration{Duration: time.Minute}, TimeZone: "UTC"}}
	raw, err := json.Marshal(&key)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}

	v.turn <- struct{}{} // a check in progress
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if resp := v.Handle(ctx, req); resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusServiceUnavailable {
		t.Fatalf("a check while another runs, its request ending: %+v, want a 503", resp.Result)
	}
	<-v.turn
	resp := v.Handle(context.Background(), req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "no renewal window opens between") {
		t.Fatalf("a check with the turn free: %+v, want the refusal", resp.Result)
	}
	if len(v.turn) != 0 {
		t.Fatal("the check did not give its turn back")
	}
}
