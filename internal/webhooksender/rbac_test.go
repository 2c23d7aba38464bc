package webhooksender

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// TestSenderReadsOnlyTheSigningCopies (docs/security.md, "The webhook sender reads only the
// signing secrets' copies"): the sender's ServiceAccount, with exactly its shipped RBAC, is
// refused by the real API server a get and a list of the system namespace's Secrets (where
// the GitHub token, the HMAC secrets, TLS keys and the hash Secrets are) and of a tenant's,
// while it reads the signing namespace, where the operator's copy is; and it delivers, end to
// end, with that copy, none being left in the system namespace.
func TestSenderReadsOnlyTheSigningCopies(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "rbac")
	secret := testSecret(7)
	rcv := newReceiver(t, secret, nil)
	sys := system(t, allowing(loopback...), Deps{RootCAs: pool(rcv)}, ns)

	// What a compromised sender would want: a Secret of the system namespace.
	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "github-org-token"},
		StringData: map[string]string{"token": "ghp_not-for-the-sender"},
	}
	if err := env.Client.Create(ctx, token); err != nil {
		t.Fatal(err)
	}
	kw := subscribe(t, ns, "audit", rcv.URL+"/hooks", secret)
	id := enqueue(t, sys, kw, "msg_rbac1")
	testenv.Eventually(t, 30*time.Second, "the delivery", func() error {
		if len(rcv.deliveries()) == 0 {
			return errors.New("nothing received")
		}
		return nil
	})
	if d := rcv.deliveries()[0]; d.verified != nil || d.id != id {
		t.Fatalf("delivery %q: the reference library says %v; want webhook-id %q, verified", d.id, d.verified, id)
	}

	// The copy it signed with is in the signing namespace, and none is in the system namespace.
	copyKey := client.ObjectKey{Namespace: signing(sys), Name: keysecret.SigningSecretName(kw.UID)}
	if err := env.Client.Get(ctx, copyKey, &corev1.Secret{}); err != nil {
		t.Fatalf("the copy %s: %v", copyKey, err)
	}
	var left corev1.SecretList
	if err := env.Client.List(ctx, &left, client.InNamespace(sys), client.MatchingLabels{keysecret.LabelComponent: keysecret.ComponentSigning}); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d signing copies in the system namespace, the first %s", len(left.Items), left.Items[0].Name)
	}

	// As the sender: refused the system namespace's Secrets and the tenant's, by name and by
	// list; allowed the signing namespace's, so the refusals are RBAC's and not a bad token.
	as := asSender(t, sys)
	for _, denied := range []string{sys, ns} {
		err := as.Get(ctx, client.ObjectKey{Namespace: denied, Name: "github-org-token"}, &corev1.Secret{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("get of a Secret in %s as the sender: %v, want Forbidden", denied, err)
		}
		if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(denied)); !apierrors.IsForbidden(err) {
			t.Errorf("list of the Secrets of %s as the sender: %v, want Forbidden", denied, err)
		}
	}
	var copies corev1.SecretList
	if err := as.List(ctx, &copies, client.InNamespace(signing(sys))); err != nil || len(copies.Items) != 1 {
		t.Errorf("list of the signing namespace as the sender: %d Secrets, %v; want the one copy", len(copies.Items), err)
	}
	if err := as.Get(ctx, copyKey, &corev1.Secret{}); err != nil {
		t.Errorf("get of the copy as the sender: %v", err)
	}
}

// asSender returns a client acting as the sender's ServiceAccount of sys, which system made,
// with a token of its own.
func asSender(t *testing.T, sys string) client.Client {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := clientset.CoreV1().ServiceAccounts(sys).CreateToken(ctx, "webhooks", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(fmt.Errorf("a token of %s/webhooks: %w", sys, err))
	}
	cfg := &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, BearerToken: tr.Status.Token}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The sender refuses to start reading its copies from the system namespace: its grant there
// would be every Secret of it. (Left out, the signing namespace is the system namespace's with
// "-webhook-signing".)
func TestNewManagerRefusesCopiesInTheSystemNamespace(t *testing.T) {
	for _, signingNS := range []string{"switchboard-system"} {
		c := &configv1alpha1.OperatorConfiguration{SystemNamespace: "switchboard-system",
			Webhooks: configv1alpha1.WebhooksConfiguration{SigningNamespace: signingNS}}
		_, err := NewManager(c, Deps{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}})
		if err == nil || !strings.Contains(err.Error(), "webhooks.signingNamespace") || !strings.Contains(err.Error(), "must differ from systemNamespace") {
			t.Errorf("signing namespace %q: %v, want refused", signingNS, err)
		}
	}
}
