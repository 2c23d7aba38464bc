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

// start runs the controller, with the operator's cache, for one test's namespace.
func start(t *testing.T, ns string) string {
	t.Helper()
	sys := env.Namespace(t, "system")
	opts := operator.Options{SystemNamespace: sys, Namespaces: []string{ns}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme.Scheme, Logger: testenv.Logger(t), Cache: operator.CacheOptions(opts),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &keywebhook.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SystemNamespace: sys,
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
	return sys
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

func copyOf(t *testing.T, sys string, uid types.UID) (*corev1.Secret, error) {
	t.Helper()
	s := &corev1.Secret{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: sys, Name: keywebhook.SigningSecretName(uid)}, s)
	return s, err
}

// The signing secrets are checked and copied into the system namespace, copied again when
// the tenant rotates them, and the copy goes with the KeyWebhook; what is wrong is said on
// Ready, never with a secret's content.
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
		if string(c.Data[keywebhook.SigningSecretsKey]) != secret(1) || c.Type != keywebhook.SecretType || c.Labels[keywebhook.LabelWebhookUID] != string(kw.UID) {
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
		if got := string(c.Data[keywebhook.SigningSecretsKey]); got != secret(2)+" "+secret(1) {
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
	var list corev1.SecretList
	if err := env.Client.List(ctx, &list, client.InNamespace(sys)); err != nil || len(list.Items) != 0 {
		t.Errorf("%d Secrets left in the system namespace (%v)", len(list.Items), err)
	}
}
