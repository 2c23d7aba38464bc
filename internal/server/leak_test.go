//go:build !unit

package server

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// TestLeakedKeyRefusedWithinOneSecond runs the real operator and the server together: a
// delivered key works on /v1 and through Envoy's ext_authz gRPC check; a LeakReport of it in
// the system namespace (as the receiver writes one) has it refused by both within a second,
// and the delivery Secret holds a replacement that works.
func TestLeakedKeyRefusedWithinOneSecond(t *testing.T) {
	sys := env.Namespace(t, "leak-system")
	ns := env.Namespace(t, "leak")
	startOperator(t, sys, ns)
	s := startAuthzServer(t, noFailureLimit(&sc{SystemNamespace: sys}), Deps{}, true)

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

// TestLeakOverlapOnTheWire: with spec.leakOverlap the real operator writes the replacement
// first, the leaked key keeps working on /v1 beside it, and the server never accepts it after
// the end the hash Secret records, which is at most the overlap after the operator acted.
func TestLeakOverlapOnTheWire(t *testing.T) {
	const overlap = 10 * time.Second
	sys := env.Namespace(t, "overlap-system")
	ns := env.Namespace(t, "overlap")
	startOperator(t, sys, ns)
	s := startServer(t, nil, noFailureLimit(&sc{SystemNamespace: sys}), Deps{}, true)
	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: switchboardv1alpha1.APIKeySpec{SecretName: "app-key"}}
	ak.Spec.LeakOverlap = &metav1.Duration{Duration: overlap}
	if err := env.Client.Create(ctx(t), ak); err != nil {
		t.Fatal(err)
	}
	leaked := deliveredKey(t, s, ns, "app-key", "1")
	sum := apikey.Sum(leaked).String()
	report := &switchboardv1alpha1.LeakReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: switchboardv1alpha1.LeakReportName(sum)},
		Spec: switchboardv1alpha1.LeakReportSpec{KeyHash: sum, KeyHint: apikey.Hint(leaked), Source: switchboardv1alpha1.LeakSourceGitHubPartner,
			URL: "https://github.com/octo/app/blob/0123abc/.env", ReportedAt: metav1.Now()},
	}
	start := time.Now()
	if err := env.Client.Create(ctx(t), report); err != nil {
		t.Fatal(err)
	}
	next := deliveredKey(t, s, ns, "app-key", "2")
	status := s.get(t, "/v1/connections", leaked).Status
	hash := &corev1.Secret{}
	if err := env.Client.Get(ctx(t), client.ObjectKey{Namespace: sys, Name: keysecret.HashName(ak.UID)}, hash); err != nil {
		t.Fatal(err)
	}
	l, ok := keysecret.LeakOf(hash)
	if !ok || l.AcceptedUntil.IsZero() || l.AcceptedUntil.Sub(l.At) > overlap {
		t.Fatalf("the leak record %+v: want an end at most %v after the leak was acted on", l, overlap)
	}
	// Replacement first: both keys work until the overlap ends (a machine so slow that the
	// replacement showed after it can say nothing of this).
	if status != http.StatusOK && time.Now().Before(l.AcceptedUntil.Add(-time.Second)) {
		t.Fatalf("the leaked key was refused (%d) before its overlap ended, its replacement just delivered", status)
	}
	// Asked until refused: an answer of 200 after the recorded end fails.
	for {
		status := s.get(t, "/v1/connections", leaked).Status
		now := time.Now()
		if status == http.StatusOK && !now.Before(l.AcceptedUntil) {
			t.Fatalf("the leaked key was accepted at %v, after the end of its overlap %v", now, l.AcceptedUntil)
		}
		if status == http.StatusUnauthorized {
			t.Logf("the leaked key was refused %v after its LeakReport was created (leakOverlap %v, recorded end %v after the operator acted)",
				now.Sub(start).Round(10*time.Millisecond), overlap, l.AcceptedUntil.Sub(l.At))
			break
		}
		if now.Sub(start) > 2*overlap+20*time.Second {
			t.Fatal("the leaked key is still accepted long after its overlap")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.get(t, "/v1/connections", next).Status != http.StatusOK {
		t.Fatal("the replacement is refused")
	}
}
