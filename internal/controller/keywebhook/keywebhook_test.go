package keywebhook_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/keywebhook"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

func secret(n byte) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = n + byte(i)
	}
	return webhookdelivery.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// start runs the controller, with the operator's cache, for one test's namespace, in a new
// system namespace, which it returns, and its signing namespace (signing).
func start(t *testing.T, ns string) string {
	t.Helper()
	sys := env.Namespace(t, "system")
	startIn(t, ns, sys)
	return sys
}

// signing is the signing namespace of the system namespace sys.
func signing(sys string) string { return sys + "-webhook-signing" }

// startIn is start in the system namespace sys, which exists.
func startIn(t *testing.T, ns, sys string) {
	t.Helper()
	if err := env.EnsureNamespace(context.Background(), signing(sys)); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme.Scheme, Logger: testenv.Logger(t), Cache: operator.CacheOptions(sys, signing(sys), []string{ns}),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &keywebhook.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SystemNamespace: sys, SigningNamespace: signing(sys),
		Policy:       webhookdelivery.Policy{Denied: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}},
		ResyncPeriod: 300 * time.Millisecond,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func ready(t *testing.T, key types.NamespacedName) (*switchboardv1alpha1.KeyWebhook, string) {
	t.Helper()
	kw := &switchboardv1alpha1.KeyWebhook{}
	if err := env.Client.Get(context.Background(), key, kw); err != nil {
		t.Fatal(err)
	}
	for _, c := range kw.Status.Conditions {
		if c.Type == switchboardv1alpha1.ConditionReady {
			return kw, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return kw, "none"
}

// copyOf reads the copy of the signing secrets of the KeyWebhook of UID uid, in the signing
// namespace of sys.
func copyOf(t *testing.T, sys string, uid types.UID) (*corev1.Secret, error) {
	t.Helper()
	s := &corev1.Secret{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: signing(sys), Name: keysecret.SigningSecretName(uid)}, s)
	return s, err
}

// The signing secrets are checked and copied into the signing namespace (never the system
// namespace), copied again when the tenant rotates them, and the copy goes with the
// KeyWebhook; what is wrong is said on Ready, never with a secret's content.
func TestSigningSecretsAreCopied(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "kw")
	sys := start(t, ns)
	key := types.NamespacedName{Namespace: ns, Name: "audit"}
	kw := &switchboardv1alpha1.KeyWebhook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}, Spec: switchboardv1alpha1.KeyWebhookSpec{
		URL: "https://hooks.example.com/switchboard", SigningSecretRef: switchboardv1alpha1.KeyWebhookSecretReference{Name: "signing", Key: "whsec"},
	}}
	if err := env.Client.Create(ctx, kw); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "SigningSecretMissing", func() error {
		if _, r := ready(t, key); !strings.HasPrefix(r, `False/SigningSecretMissing: spec.signingSecretRef: Secret "signing" not found`) {
			return errors.New(r)
		}
		return nil
	})

	// A malformed secret: said by position, never quoted.
	bad := "whsec_not-base64-" + strings.Repeat("x", 20)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signing"}, StringData: map[string]string{"whsec": secret(1) + " " + bad}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the malformed secret refused", func() error {
		_, r := ready(t, key)
		if strings.Contains(r, bad) || strings.Contains(r, secret(1)) {
			t.Fatalf("Ready quotes a secret: %s", r)
		}
		if !strings.Contains(r, "signing secret 2 of 2") {
			return errors.New(r)
		}
		return nil
	})

	s.StringData = map[string]string{"whsec": secret(1)}
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the copy and Ready", func() error {
		kw, r := ready(t, key)
		c, err := copyOf(t, sys, kw.UID)
		if err != nil {
			return err
		}
		if string(c.Data[keysecret.DataSigningSecrets]) != secret(1) || c.Type != keysecret.TypeSigning || c.Labels[keysecret.LabelWebhookUID] != string(kw.UID) {
			return fmt.Errorf("copy of type %s, labels %v", c.Type, c.Labels)
		}
		if !strings.HasPrefix(r, "True/Active") {
			return errors.New(r)
		}
		return nil
	})

	// The tenant rotates: both secrets for a while.
	s.StringData = map[string]string{"whsec": secret(2) + "\n" + secret(1)}
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the rotation copied", func() error {
		c, err := copyOf(t, sys, kw.UID)
		if err != nil {
			return err
		}
		if got := string(c.Data[keysecret.DataSigningSecrets]); got != secret(2)+" "+secret(1) {
			return errors.New("the copy holds the old secrets")
		}
		return nil
	})

	// An endpoint the policy refuses.
	k, _ := ready(t, key)
	k.Spec.URL = "https://10.96.0.1/"
	if err := env.Client.Update(ctx, k); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "InvalidEndpoint", func() error {
		if _, r := ready(t, key); !strings.HasPrefix(r, "False/InvalidEndpoint: spec.url: refused by the webhook network policy: 10.96.0.1 is in the denied network 10.96.0.0/12") {
			return errors.New(r)
		}
		return nil
	})

	// Deleted: its copy goes.
	if err := env.Client.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the copy deleted", func() error {
		switch _, err := copyOf(t, sys, kw.UID); {
		case err == nil:
			return errors.New("the copy is still there")
		case !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
	for _, in := range []string{sys, signing(sys)} {
		var list corev1.SecretList
		if err := env.Client.List(ctx, &list, client.InNamespace(in)); err != nil || len(list.Items) != 0 {
			t.Errorf("%d Secrets left in %s (%v)", len(list.Items), in, err)
		}
	}
}

// legacyCopy is a copy of the signing secrets as an operator before the signing namespace kept
// it: in the system namespace sys, for the KeyWebhook ns/name of UID uid.
func legacyCopy(sys, ns, name string, uid types.UID, secrets string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sys, Name: keysecret.SigningSecretName(uid),
			Labels: map[string]string{
				keysecret.LabelManagedBy: keysecret.ManagedBy, keysecret.LabelComponent: keysecret.ComponentSigning,
				keysecret.LabelWebhookNamespace: ns, keysecret.LabelWebhookName: name, keysecret.LabelWebhookUID: string(uid),
			},
		},
		Type: keysecret.TypeSigning,
		Data: map[string][]byte{keysecret.DataSigningSecrets: []byte(secrets)},
	}
}

// An upgrade from an operator that kept the copies in the system namespace converges: as the
// controller starts, each KeyWebhook's copy is written in the signing namespace, with the
// tenant's current secrets, and its stale copy in the system namespace is deleted, as is the
// stale copy of a KeyWebhook deleted meanwhile; the system namespace's other Secrets stay.
func TestStaleCopiesInTheSystemNamespaceAreDeleted(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "kw")
	sys := env.Namespace(t, "system")
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signing"}, StringData: map[string]string{"secret": secret(3)}}
	kw := &switchboardv1alpha1.KeyWebhook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "audit"}, Spec: switchboardv1alpha1.KeyWebhookSpec{
		URL: "https://hooks.example.com/switchboard", SigningSecretRef: switchboardv1alpha1.KeyWebhookSecretReference{Name: s.Name},
	}}
	// What an older operator left: the copy of kw (with the secret before a rotation), the
	// copy of a KeyWebhook since deleted, and the system namespace's own Secrets.
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "github-org-token"}, StringData: map[string]string{"token": "x"}}
	for _, o := range []client.Object{s, kw, other} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	stale := legacyCopy(sys, ns, kw.Name, kw.UID, secret(2))
	gone := legacyCopy(sys, ns, "gone", types.UID("0b7e4a52-9d7c-4f0e-8c1a-3e2f5d6a7b8c"), secret(4))
	for _, o := range []client.Object{stale, gone} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	startIn(t, ns, sys)
	testenv.Eventually(t, 30*time.Second, "the copy in the signing namespace", func() error {
		c, err := copyOf(t, sys, kw.UID)
		if err != nil {
			return err
		}
		if string(c.Data[keysecret.DataSigningSecrets]) != secret(3) {
			return errors.New("the copy does not hold the tenant's current secret")
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "the stale copies deleted", func() error {
		for _, o := range []*corev1.Secret{stale, gone} {
			switch err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), &corev1.Secret{}); {
			case err == nil:
				return fmt.Errorf("%s is still in the system namespace", o.Name)
			case !apierrors.IsNotFound(err):
				return err
			}
		}
		return nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}); err != nil {
		t.Errorf("the system namespace's own Secret: %v", err)
	}
	if _, r := ready(t, types.NamespacedName{Namespace: ns, Name: kw.Name}); !strings.HasPrefix(r, "True/Active") {
		t.Errorf("Ready %s", r)
	}
}
