//go:build !unit

package reveal_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

var claimRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}}}

// TestRevealForThePerson: a caller with the chart's grant claims a key for a person who may get
// and delete its reveal Secret. The key works on /v1, the Secret is gone, and a second claim
// gets nothing.
func TestRevealForThePerson(t *testing.T) {
	ns := sys.Namespace(t, "reveal")
	bind(t, ns, "Role", "owners", claimRules, group("oidc:owners"))
	key := issued(t, ns, "first")
	c, err := reveal.NewClient(caller(t, "panel", callerRules()), sys.RevealURL, bundle())
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.For("oidc:alice", []string{"oidc:owners"}).Claim(testContext(t), key)
	if err != nil {
		t.Fatalf("claiming for oidc:alice: %v", err)
	}
	if !strings.HasPrefix(got.Key, "sb_live_") || got.Hint == "" || got.Generation != 1 {
		t.Fatalf("claimed %q (hint %q, generation %d), want a live key of generation 1", got.Hint, got.Hint, got.Generation)
	}
	if v1Status(t, got.Key) != 200 {
		t.Fatal("the claimed key does not authenticate")
	}
	if secretExists(t, ns, key.Status.RevealSecretName) {
		t.Fatal("the reveal Secret is still there after the claim")
	}
	if _, err := c.For("oidc:alice", []string{"oidc:owners"}).Claim(testContext(t), key); !errors.Is(err, keyclient.ErrAlreadyClaimed) {
		t.Fatalf("claiming again: %v, want ErrAlreadyClaimed", err)
	}
}

// TestRevealRefuses performs what a taken-over panel would try: claiming for someone without
// the right, for a system identity, a Secret that is not a reveal Secret, and calling without
// the grant or without a token. Each is refused with its own error, and the Secret stays.
func TestRevealRefuses(t *testing.T) {
	ns := sys.Namespace(t, "refuse")
	bind(t, ns, "Role", "owners", claimRules, group("oidc:owners"))
	bind(t, ns, "Role", "readers", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}, group("oidc:readers"))
	key := issued(t, ns, "target")
	panel := caller(t, "panel", callerRules())
	good, err := reveal.NewClient(panel, sys.RevealURL, bundle())
	if err != nil {
		t.Fatal(err)
	}
	// A Secret of the tenant's own, named as if it were the key's reveal Secret.
	plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database"}, StringData: map[string]string{"key": "hunter2", "password": "hunter2"}}
	if err := sys.Client.Create(testContext(t), plain); err != nil {
		t.Fatal(err)
	}
	other := key.DeepCopy()
	other.Status.RevealSecretName = plain.Name
	renamed := key.DeepCopy()
	renamed.UID = "00000000-0000-0000-0000-000000000000"

	noGrant, err := reveal.NewClient(caller(t, "nogrant", callerRules()[1:]), sys.RevealURL, bundle())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		client *reveal.Client
		user   string
		groups []string
		key    *switchboardv1alpha1.APIKey
		want   func(error) bool
	}{
		{"a person who may only get the Secret", good, "oidc:bob", []string{"oidc:readers"}, key, func(err error) bool {
			var f *keyclient.ForbiddenError
			return errors.As(err, &f) && len(f.Missing) == 1 && f.Missing[0].Verb == "delete"
		}},
		{"a person with no right at all", good, "oidc:mallory", nil, key, func(err error) bool { return errors.Is(err, keyclient.ErrForbidden) }},
		{"system:masters", good, "oidc:mallory", []string{"system:masters"}, key, hasText("system:")},
		{"a ServiceAccount", good, "system:serviceaccount:" + ns + ":default", nil, key, hasText("system:")},
		{"a Secret that is not a reveal Secret", good, "oidc:alice", []string{"oidc:owners"}, other, func(err error) bool { return errors.Is(err, keyclient.ErrNotARevealSecret) }},
		{"another APIKey's UID", good, "oidc:alice", []string{"oidc:owners"}, renamed, func(err error) bool { return errors.Is(err, keyclient.ErrNotARevealSecret) }},
		{"a caller without the grant to post /reveal", noGrant, "oidc:alice", []string{"oidc:owners"}, key, hasText("403")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.client.For(tt.user, tt.groups).Claim(testContext(t), tt.key)
			if err == nil || !tt.want(err) {
				t.Fatalf("claim: %v (key %q), want a refusal of its own kind", err, got.Hint)
			}
			if got.Key != "" || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("a refusal carried a secret: %v", err)
			}
			for _, s := range []string{key.Status.RevealSecretName, plain.Name} {
				if !secretExists(t, ns, s) {
					t.Fatalf("Secret %s is gone after a refused claim", s)
				}
			}
		})
	}
	t.Run("no token", func(t *testing.T) {
		anon := &rest.Config{Host: sys.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: sys.Config.CAData}, BearerToken: "not-a-token"}
		c, err := reveal.NewClient(anon, sys.RevealURL, bundle())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.For("oidc:alice", []string{"oidc:owners"}).Claim(testContext(t), key); err == nil {
			t.Fatal("a caller with an invalid token was served")
		}
	})
	// After all that, the person it belongs to still gets the key.
	if _, err := good.For("oidc:alice", []string{"oidc:owners"}).Claim(testContext(t), key); err != nil {
		t.Fatalf("claiming for oidc:alice after the refusals: %v", err)
	}
}

// selfSignedPEM is a certificate for 127.0.0.1 that is not the endpoint's.
func selfSignedPEM(t *testing.T) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func hasText(s string) func(error) bool {
	return func(err error) bool { return strings.Contains(err.Error(), s) }
}

// TestRevealBundle: the endpoint's certificate is in the bundle ConfigMap, and a caller that
// trusts another bundle does not send it the request.
func TestRevealBundle(t *testing.T) {
	var cm corev1.ConfigMap
	if err := sys.Client.Get(testContext(t), bundle(), &cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data[reveal.BundleKey], "BEGIN CERTIFICATE") {
		t.Fatalf("the bundle holds no certificate: %q", cm.Data[reveal.BundleKey])
	}
	ns := sys.Namespace(t, "bundle")
	fake := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Data: map[string]string{reveal.BundleKey: selfSignedPEM(t)}}
	if err := sys.Client.Create(testContext(t), fake); err != nil {
		t.Fatal(err)
	}
	cfg := caller(t, "mistrust", append(callerRules(),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"other"}, Verbs: []string{"get"}}))
	c, err := reveal.NewClient(cfg, sys.RevealURL, client.ObjectKeyFromObject(fake))
	if err != nil {
		t.Fatal(err)
	}
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x", UID: "u"}}
	key.Status.RevealSecretName = "x"
	if _, err := c.For("oidc:alice", nil).Claim(testContext(t), key); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a caller trusting another bundle: %v, want a certificate error", err)
	}
}
