//go:build !unit

package fault

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// TestWebhookDeliverySurvivesSIGKILL: the sender (the real binary) is killed with SIGKILL while
// the receiver holds its request open; started again, it takes the Lease the dead one cannot
// release, and the event arrives with the same webhook-id (verified by the Standard Webhooks
// reference library): at least once, across a crash.
func TestWebhookDeliverySurvivesSIGKILL(t *testing.T) {
	scanAfter(t)
	ensureSystemNamespace(t)
	ns := env.Namespace(t, "webhooks")
	ctx := ctxFor(t, 3*time.Minute)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i * 7)
	}
	secret := webhookdelivery.SecretPrefix + base64.StdEncoding.EncodeToString(key)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}

	// The receiver holds the first request open until the test lets it go; it takes the rest.
	type delivery struct {
		id       string
		verified error
	}
	var (
		mu     sync.Mutex
		got    []delivery
		held   = make(chan struct{})
		letGo  = make(chan struct{})
		holdMu sync.Once
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{id: r.Header.Get("webhook-id"), verified: wh.Verify(body, r.Header)})
		first := len(got) == 1
		mu.Unlock()
		if first {
			holdMu.Do(func() { close(held) })
			select {
			case <-letGo:
			case <-r.Context().Done():
			}
			return
		}
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-letGo:
		default:
			close(letGo)
		}
	}()
	deliveries := func() []delivery {
		mu.Lock()
		defer mu.Unlock()
		return append([]delivery(nil), got...)
	}

	// The sender trusts the receiver's certificate as a system root (SSL_CERT_FILE), and its
	// configuration allows loopback, where the receiver is.
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "operator.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: config.switchboard.dev/v1alpha1
kind: OperatorConfiguration
systemNamespace: `+systemNamespace+`
metricsBindAddress: ""
healthProbeBindAddress: ""
kubeAPIQPS: 500
kubeAPIBurst: 1000
webhooks:
  allowedNetworks: ["127.0.0.0/8"]
  attemptTimeout: 2m
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--config="+cfg, "--leader-elect=false")
	sender := func(name string) *process {
		cmd := exec.Command(switchboardBin, "webhooks", "--config="+cfg)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "SSL_CERT_FILE="+ca)
		return startCmd(t, name, cmd)
	}
	first := sender("webhooks-a")

	// Subscribe, and record an event as the operator does.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signing"}, StringData: map[string]string{"secret": secret}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	kw := &switchboardv1alpha1.KeyWebhook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "audit"}, Spec: switchboardv1alpha1.KeyWebhookSpec{
		URL: srv.URL + "/events", SigningSecretRef: switchboardv1alpha1.KeyWebhookSecretReference{Name: "signing"},
	}}
	if err := env.Client.Create(ctx, kw); err != nil {
		t.Fatal(err)
	}
	const id = "msg_sigkill"
	msg, err := webhookdelivery.NewMessage(id, webhookdelivery.Event{Type: webhookdelivery.KeyRevoked, Timestamp: time.Now().UTC().Truncate(time.Second),
		Data: webhookdelivery.KeyData{Namespace: ns, Name: "billing", KeyGeneration: 1, KeyHint: "sb_live_AbCd…wxyz"}})
	if err != nil {
		t.Fatal(err)
	}
	outbox := types.NamespacedName{Namespace: systemNamespace, Name: switchboardv1alpha1.WebhookOutboxName(ns)}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ob := &switchboardv1alpha1.WebhookOutbox{ObjectMeta: metav1.ObjectMeta{Namespace: outbox.Namespace, Name: outbox.Name}}
		if err := env.Client.Get(ctx, outbox, ob); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		ob.Spec.Namespace = ns
		ob.Spec.Messages = append(ob.Spec.Messages, switchboardv1alpha1.WebhookMessage{
			ID: id, WebhookName: kw.Name, WebhookUID: string(kw.UID), Type: switchboardv1alpha1.KeyEventType(webhookdelivery.KeyRevoked), Body: string(msg.Body),
		})
		if ob.ResourceVersion == "" {
			return env.Client.Create(ctx, ob)
		}
		return env.Client.Update(ctx, ob)
	}); err != nil {
		t.Fatal(err)
	}

	select {
	case <-held:
	case <-time.After(90 * time.Second):
		t.Fatal("the first sender never delivered")
	}
	first.kill()
	killedAt := time.Now()
	close(letGo)
	ob := &switchboardv1alpha1.WebhookOutbox{}
	if err := env.Client.Get(ctx, outbox, ob); err != nil {
		t.Fatal(err)
	}
	if len(ob.Spec.Messages) != 1 || ob.Spec.Messages[0].ID != id {
		t.Fatalf("after the kill the outbox holds %+v; want the message, undelivered", ob.Spec.Messages)
	}

	sender("webhooks-b")
	testenv.Eventually(t, 90*time.Second, "the delivery by the second sender", func() error {
		if n := len(deliveries()); n < 2 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	took := time.Since(killedAt)
	for i, d := range deliveries() {
		if d.id != id || d.verified != nil {
			t.Errorf("request %d: webhook-id %q, reference library: %v; want %q, verified", i+1, d.id, d.verified, id)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the outbox emptied", func() error {
		if err := env.Client.Get(ctx, outbox, ob); err != nil {
			return err
		}
		if len(ob.Spec.Messages) != 0 {
			return fmt.Errorf("%d messages", len(ob.Spec.Messages))
		}
		return nil
	})
	t.Logf("the sender was killed mid-delivery; the next one delivered %s again %s later (the Lease's 15 s included)", id, took.Round(time.Millisecond))
	if n := len(deliveries()); n != 2 {
		t.Errorf("%d requests; want the one cut by the kill and the one after", n)
	}
}
