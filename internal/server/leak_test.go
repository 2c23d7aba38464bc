//go:build !unit

package server

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// TestLeakedKeyRefusedWithinOneSecond runs the real operator and the server together: a
// delivered key works on /v1 and through Envoy's ext_authz gRPC check; a LeakReport of it in
// the system namespace (as the receiver writes one) has it refused by both within a second,
// and the delivery Secret holds a replacement that works.
func TestLeakedKeyRefusedWithinOneSecond(t *testing.T) {
	sys := env.Namespace(t, "leak-system")
	ns := env.Namespace(t, "leak")
	startOperator(t, sys, ns)
	s := startAuthzServer(t, Options{SystemNamespace: sys, FailureRate: -1}, true)

	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: switchboardv1alpha1.APIKeySpec{SecretName: "app-key"}}
	if err := env.Client.Create(ctx(t), ak); err != nil {
		t.Fatal(err)
	}
	leaked := deliveredKey(t, s.testServer, ns, "app-key", "1")
	ask := call{authorization: withBearer(leaked), client: "192.0.2.1"}
	if a := s.askGRPC(t, ask); a.status != http.StatusOK {
		t.Fatalf("ext_authz answers %d for the delivered key before any report", a.status)
	}

	sum := apikey.Sum(leaked).String()
	report := &switchboardv1alpha1.LeakReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: switchboardv1alpha1.LeakReportName(sum)},
		Spec: switchboardv1alpha1.LeakReportSpec{
			KeyHash: sum, KeyHint: apikey.Hint(leaked), Source: switchboardv1alpha1.LeakSourceGitHubAlert,
			URL: "https://github.com/octo/app/security/secret-scanning/1", ReportedAt: metav1.Now(),
		},
	}
	start := time.Now()
	if err := env.Client.Create(ctx(t), report); err != nil {
		t.Fatal(err)
	}
	// Each door is asked in turn until both refuse: a door's time is when it first refused.
	var v1, grpc time.Duration
	for v1 == 0 || grpc == 0 {
		if v1 == 0 && s.get(t, "/v1/connections", leaked).Status == http.StatusUnauthorized {
			v1 = time.Since(start)
		}
		if grpc == 0 && s.askGRPC(t, ask).status == http.StatusUnauthorized {
			grpc = time.Since(start)
		}
		if time.Since(start) > time.Second && (v1 == 0 || grpc == 0) {
			t.Fatalf("the leaked key is still accepted 1s after its LeakReport was created (refused on /v1 after %v, through ext_authz after %v; 0: not yet)", v1, grpc)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the leaked key was refused on /v1 %v and through ext_authz %v after its LeakReport was created",
		v1.Round(100*time.Microsecond), grpc.Round(100*time.Microsecond))
	next := deliveredKey(t, s.testServer, ns, "app-key", "2")
	if next == leaked {
		t.Fatal("the delivery Secret still holds the leaked key")
	}
	if a := s.askGRPC(t, call{authorization: withBearer(next), client: "192.0.2.1"}); a.status != http.StatusOK {
		t.Fatalf("ext_authz answers %d for the replacement", a.status)
	}
}
