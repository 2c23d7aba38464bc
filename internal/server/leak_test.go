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
// delivered key works on /v1; a LeakReport of it in the system namespace (as the receiver
// writes one) has it refused on /v1 within a second, and the delivery Secret holds a
// replacement that works.
func TestLeakedKeyRefusedWithinOneSecond(t *testing.T) {
	sys := env.Namespace(t, "leak-system")
	ns := env.Namespace(t, "leak")
	startOperator(t, sys, ns)
	s := startServer(t, nil, Options{SystemNamespace: sys, FailureRate: -1}, true)

	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: switchboardv1alpha1.APIKeySpec{SecretName: "app-key"}}
	if err := env.Client.Create(ctx(t), ak); err != nil {
		t.Fatal(err)
	}
	leaked := deliveredKey(t, s, ns, "app-key", "1")

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
	for s.get(t, "/v1/connections", leaked).Status != http.StatusUnauthorized {
		if time.Since(start) > time.Second {
			t.Fatal("the leaked key is still accepted 1s after its LeakReport was created")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the leaked key was refused on /v1 %v after its LeakReport was created", time.Since(start).Round(100*time.Microsecond))
	if next := deliveredKey(t, s, ns, "app-key", "2"); next == leaked {
		t.Fatal("the delivery Secret still holds the leaked key")
	}
}
