package webhooksender

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ptr "k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// loopback is what the tests' configuration allows: their receivers listen there.
var loopback = []string{"127.0.0.0/8", "::1/128"}

// testSecret is a "whsec_" signing secret made of n.
func testSecret(n byte) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = n + byte(i)
	}
	return webhookdelivery.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// delivery is one request a receiver got, verified by the Standard Webhooks reference library.
type delivery struct {
	id       string
	body     []byte
	at       time.Time
	verified error
}

// receiver is a tenant's HTTPS endpoint on loopback that verifies each delivery with the
// reference library (never switchboard's code) and answers with answer (200 when nil).
type receiver struct {
	*httptest.Server
	verifier *standardwebhooks.Webhook
	answer   func(n int, w http.ResponseWriter, r *http.Request)

	mu  sync.Mutex
	got []delivery
}

func newReceiver(t *testing.T, secret string, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	return newReceiverOn(t, "", secret, answer)
}

// newReceiverOn is newReceiver listening on addr (127.0.0.1:0 when "").
func newReceiverOn(t *testing.T, addr, secret string, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{verifier: wh, answer: answer}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		d := delivery{id: req.Header.Get("webhook-id"), body: body, at: time.Now(), verified: wh.Verify(body, req.Header)}
		r.mu.Lock()
		r.got = append(r.got, d)
		n := len(r.got)
		r.mu.Unlock()
		if r.answer != nil {
			r.answer(n, w, req)
		}
	}))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Listener.Close()
		r.Listener = l
		// httptest's certificate names 127.0.0.1 and ::1 alone.
		host, _, _ := net.SplitHostPort(addr)
		r.TLS = &tls.Config{Certificates: []tls.Certificate{certificateFor(t, net.ParseIP(host))}}
	}
	r.StartTLS()
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// certificateFor returns a self-signed serving certificate for ip.
func certificateFor(t *testing.T, ip net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: ip.String()}, IPAddresses: []net.IP{ip},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// pool trusts the receivers' certificates.
func pool(rs ...*receiver) *x509.CertPool {
	p := x509.NewCertPool()
	for _, r := range rs {
		p.AddCert(r.Certificate())
	}
	return p
}

// allowing is a webhooks section that allows the networks given, and denies only what is
// always refused.
func allowing(networks ...string) configv1alpha1.WebhooksConfiguration {
	return configv1alpha1.WebhooksConfiguration{AllowedNetworks: networks, DeniedNetworks: []string{}}
}

// system starts, for one test, a system namespace and its signing namespace (signing) with
// the real operator (whose KeyWebhook controller copies the signing secrets) watching
// namespaces, and the sender, leader-elected, with the webhooks section w (attempts of 10s
// unless it says) and deps, both stopped when the test ends; it returns the system namespace.
func system(t *testing.T, w configv1alpha1.WebhooksConfiguration, deps Deps, namespaces ...string) string {
	t.Helper()
	sys := env.Namespace(t, "system")
	if err := env.EnsureNamespace(context.Background(), signing(sys)); err != nil {
		t.Fatal(err)
	}
	if w.AttemptTimeout == nil {
		w.AttemptTimeout = &metav1.Duration{Duration: 10 * time.Second}
	}
	ctx, cancel := context.WithCancel(context.Background())
	oc := testenv.OperatorConfiguration(sys)
	oc.Webhooks = w
	op, err := operator.NewManager(oc, operator.Deps{
		RESTConfig: env.Config, Namespaces: namespaces, Logger: testenv.Logger(t), SkipControllerNameValidation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := testenv.OperatorConfiguration(sys)
	sc.Webhooks, sc.LeaderElect = w, ptr.To(true)
	deps.RESTConfig = shippedIdentity(t, sys)
	deps.SkipControllerNameValidation = true
	deps.Logger = testenv.Logger(t)
	sender, err := NewManager(sc, deps)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, m := range []interface{ Start(context.Context) error }{op, sender} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Start(ctx); err != nil {
				t.Errorf("a manager stopped: %v", err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return sys
}

// signing is the signing namespace of the system namespace sys: the configuration's default.
func signing(sys string) string { return configv1alpha1.DefaultWebhookSigningNamespace(sys) }

// shippedIdentity returns a client configuration of a ServiceAccount of sys with exactly the
// sender's shipped RBAC (config/rbac/webhooks_role.yaml; the chart's is the same, test/chart),
// each Role in the namespace it is shipped for (switchboard-system is sys, its signing
// namespace signing(sys)): the suite runs the sender as it is deployed, so a grant missing
// fails it, and a grant too many shows in TestSenderReadsOnlyTheSigningCopies.
func shippedIdentity(t *testing.T, sys string) *rest.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "webhooks_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	asShipped := configv1alpha1.DefaultSystemNamespace
	shipped := map[string]string{asShipped: sys, configv1alpha1.DefaultWebhookSigningNamespace(asShipped): signing(sys)}
	roleRules := map[string][]rbacv1.PolicyRule{}
	var clusterRules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		switch r.Kind {
		case "Role":
			ns, ok := shipped[r.Namespace]
			if !ok {
				t.Fatalf("config/rbac/webhooks_role.yaml: Role %s is in %q, neither the system nor the signing namespace", r.Name, r.Namespace)
			}
			roleRules[ns] = append(roleRules[ns], r.Rules...)
		case "ClusterRole":
			clusterRules = r.Rules
		}
	}
	if len(roleRules[sys]) == 0 || len(roleRules[signing(sys)]) == 0 || len(clusterRules) == 0 {
		t.Fatal("config/rbac/webhooks_role.yaml lacks a Role in the system namespace, one in the signing namespace or a ClusterRole")
	}
	cfg := env.ServiceAccount(t, sys, "webhooks", roleRules[sys]...)
	ctx := context.Background()
	sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sys, Name: "webhooks"}}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sys + "-webhooks"}, Rules: clusterRules}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sys + "-webhooks"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   sa,
	}
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: signing(sys), Name: "webhooks-signing"}, Rules: roleRules[signing(sys)]}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: signing(sys), Name: "webhooks-signing"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
		Subjects:   sa,
	}
	for _, o := range []client.Object{cr, crb, r, rb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}

// subscribe creates a KeyWebhook named name in ns to url, signed with secret.
func subscribe(t *testing.T, ns, name, url, secret string) *switchboardv1alpha1.KeyWebhook {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-signing"}, StringData: map[string]string{"secret": secret}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	kw := &switchboardv1alpha1.KeyWebhook{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: switchboardv1alpha1.KeyWebhookSpec{
			URL: url, SigningSecretRef: switchboardv1alpha1.KeyWebhookSecretReference{Name: s.Name},
		},
	}
	if err := env.Client.Create(ctx, kw); err != nil {
		t.Fatal(err)
	}
	return kw
}

// enqueue appends an apikey.revoked event for kw to its namespace's outbox, as the operator
// records one, and returns its webhook-id.
func enqueue(t *testing.T, sys string, kw *switchboardv1alpha1.KeyWebhook, id string) string {
	t.Helper()
	msg, err := webhookdelivery.NewMessage(id, webhookdelivery.Event{
		Type: webhookdelivery.KeyRevoked, Timestamp: time.Now().UTC().Truncate(time.Second),
		Data: webhookdelivery.KeyData{Namespace: kw.Namespace, Name: "billing", KeyGeneration: 1, KeyHint: "sb_live_AbCd…wxyz", Reason: "revoked by a test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := switchboardv1alpha1.WebhookMessage{
		ID: msg.ID, WebhookName: kw.Name, WebhookUID: string(kw.UID), Type: switchboardv1alpha1.KeyEventType(webhookdelivery.KeyRevoked), Body: string(msg.Body),
	}
	ctx := context.Background()
	key := types.NamespacedName{Namespace: sys, Name: switchboardv1alpha1.WebhookOutboxName(kw.Namespace)}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ob := &switchboardv1alpha1.WebhookOutbox{}
		if err := env.Client.Get(ctx, key, ob); apierrors.IsNotFound(err) {
			ob = &switchboardv1alpha1.WebhookOutbox{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec:       switchboardv1alpha1.WebhookOutboxSpec{Namespace: kw.Namespace, Messages: []switchboardv1alpha1.WebhookMessage{m}},
			}
			return env.Client.Create(ctx, ob)
		} else if err != nil {
			return err
		}
		ob.Spec.Messages = append(ob.Spec.Messages, m)
		return env.Client.Update(ctx, ob)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// outbox reads ns's outbox.
func outbox(t *testing.T, sys, ns string) *switchboardv1alpha1.WebhookOutbox {
	t.Helper()
	ob := &switchboardv1alpha1.WebhookOutbox{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: sys, Name: switchboardv1alpha1.WebhookOutboxName(ns)}, ob); err != nil {
		t.Fatal(err)
	}
	return ob
}

// keyWebhook reads kw again.
func keyWebhook(t *testing.T, kw *switchboardv1alpha1.KeyWebhook) *switchboardv1alpha1.KeyWebhook {
	t.Helper()
	fresh := &switchboardv1alpha1.KeyWebhook{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(kw), fresh); err != nil {
		t.Fatal(err)
	}
	return fresh
}

// ready returns kw's Ready condition as "Status/Reason: message".
func ready(kw *switchboardv1alpha1.KeyWebhook) string {
	for _, c := range kw.Status.Conditions {
		if c.Type == switchboardv1alpha1.ConditionReady {
			return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "none"
}

// listen returns a TCP listener on addr that counts the connections it accepts and holds
// them open without a byte (a black hole), or nil when this machine has no such address.
func listen(t *testing.T, addr string) *blackHole {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Logf("cannot listen on %s here: %v", addr, err)
		return nil
	}
	b := &blackHole{Listener: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			_ = c.Close()
		}
	})
	return b
}

// blackHole accepts connections and never answers.
type blackHole struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (b *blackHole) accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *blackHole) port() string {
	_, p, _ := net.SplitHostPort(b.Addr().String())
	return p
}
