//go:build !unit

package panel_test

import (
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/keyclient/keyclienttest"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

func TestCreateShowOnceRotateRevoke(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "keys")
	token := grant(t, ns, "owner", ownerRules)
	logs := &logBuffer{}
	srv := startPanel(t, nil, panel.Deps{Logger: logs.logger()})
	v := newVisitor(t, srv)
	v.signIn(token, ns)

	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"ci"}, "description": {"CI pipeline"}, "expires": {"30d"}})
	key := revealedKey(p.body)
	if p.status != http.StatusOK || key == "" {
		t.Fatalf("create: %d, error %q, no key shown", p.status, errorLine(p.body))
	}
	requireSecurityHeaders(t, p)
	if !strings.Contains(p.body, "it will not be shown again") || !strings.Contains(p.body, `data-copy="new-key"`) {
		t.Fatal("the key is shown without the store-it-now notice or the copy button")
	}
	if !strings.Contains(p.body, `data-replace-url="/keys?namespace=`+ns+`"`) {
		t.Fatal("the page showing the key does not replace the POST in the browser's history")
	}
	requireHash(t, ns, "ci", key)
	requireV1(t, key, http.StatusOK)
	created, _ := hashSecret(t, ns, "ci")
	if created.Spec.Description != "CI pipeline" || created.Spec.ExpiresAt == nil ||
		time.Until(created.Spec.ExpiresAt.Time) < 29*24*time.Hour {
		t.Fatalf("APIKey spec = %+v, want the description and an expiry in 30 days", created.Spec)
	}
	var reveal corev1.Secret
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "ci-key-1"}, &reveal); !apierrors.IsNotFound(err) {
		t.Fatalf("the reveal Secret is still there after the key was shown: %v", err)
	}

	p = v.get("/keys?namespace=" + ns)
	if strings.Contains(p.body, key) || revealedKey(p.body) != "" {
		t.Fatal("the key is shown again on the next page")
	}
	if !strings.Contains(p.body, `data-key="ci"`) || !strings.Contains(p.body, created.Status.KeyHint) || !strings.Contains(p.body, "Active") {
		t.Fatalf("the table lacks the key's row, hint or state")
	}

	// Creating it twice fails clearly and reveals nothing.
	p = v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"ci"}, "expires": {""}})
	if p.status != http.StatusConflict || !strings.Contains(errorLine(p.body), "already exists") || revealedKey(p.body) != "" {
		t.Fatalf("second create: %d %q", p.status, errorLine(p.body))
	}

	// Rotate with a grace period: a new key, the old one still accepted until the grace ends.
	p = v.get("/keys/rotate?namespace=" + ns + "&name=ci")
	if p.status != http.StatusOK || !strings.Contains(p.body, `value="168h"`) {
		t.Fatalf("rotate form: %d %q", p.status, errorLine(p.body))
	}
	requestedAt := regexpValue(t, p.body, "requested_at")
	rotateForm := url.Values{"namespace": {ns}, "name": {"ci"}, "grace": {"1h"}, "requested_at": {requestedAt}}
	p = v.postCSRF("/keys/rotate", rotateForm)
	rotated := revealedKey(p.body)
	if p.status != http.StatusOK || rotated == "" || rotated == key {
		t.Fatalf("rotate: %d %q, new key shown: %v", p.status, errorLine(p.body), rotated != "")
	}
	if !strings.Contains(p.body, "previous key keeps working until") {
		t.Fatal("the rotation page does not say until when the previous key works")
	}
	requireHash(t, ns, "ci", rotated)
	requireV1(t, rotated, http.StatusOK)
	requireV1(t, key, http.StatusOK) // within the grace period
	_, secret := hashSecret(t, ns, "ci")
	if got := string(secret.Data[keysecret.DataPreviousHash]); got != sha(key) {
		t.Fatalf("previous.sha256 = %s, want the hash of the first key", got)
	}
	// Posting the same rotate form again (a reload) rotates nothing.
	p = v.postCSRF("/keys/rotate", rotateForm)
	if p.status != http.StatusConflict || revealedKey(p.body) != "" || !strings.Contains(errorLine(p.body), "already carried out") {
		t.Fatalf("re-posted rotation: %d %q", p.status, errorLine(p.body))
	}
	requireHash(t, ns, "ci", rotated)

	// Revoke: a confirmation page, then the POST.
	p = v.get("/keys/revoke?namespace=" + ns + "&name=ci")
	if p.status != http.StatusOK || !strings.Contains(p.body, "cannot be undone") {
		t.Fatalf("revoke confirmation: %d %q", p.status, errorLine(p.body))
	}
	if p = v.postCSRF("/keys/revoke", url.Values{"namespace": {ns}, "name": {"ci"}}); p.status != http.StatusBadRequest {
		t.Fatalf("revoke without confirmation: %d, want 400", p.status)
	}
	p = v.postCSRF("/keys/revoke", url.Values{"namespace": {ns}, "name": {"ci"}, "confirm": {"yes"}})
	if p.status != http.StatusOK || p.url.Path != "/keys" || !noticePattern.MatchString(p.body) || !strings.Contains(p.body, "Revoked") {
		t.Fatalf("revoke: %d %s %q", p.status, p.url, errorLine(p.body))
	}
	var revoked switchboardv1alpha1.APIKey
	if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "ci"}, &revoked); err != nil || !revoked.Spec.Revoked {
		t.Fatalf("APIKey not revoked: %v %+v", err, revoked.Spec)
	}
	requireV1(t, rotated, http.StatusUnauthorized)
	requireV1(t, key, http.StatusUnauthorized)
	if p = v.get("/keys/rotate?namespace=" + ns + "&name=ci"); p.status != http.StatusOK {
		t.Fatalf("rotate form of a revoked key: %d", p.status)
	}
	p = v.postCSRF("/keys/rotate", url.Values{"namespace": {ns}, "name": {"ci"}, "grace": {"0s"}, "requested_at": {regexpValue(t, p.body, "requested_at")}})
	if p.status != http.StatusConflict || !strings.Contains(errorLine(p.body), "revoked") {
		t.Fatalf("rotating a revoked key: %d %q", p.status, errorLine(p.body))
	}

	out := logs.String()
	for name, secret := range map[string]string{"bearer token": token, "first key": key, "rotated key": rotated} {
		if strings.Contains(out, secret) {
			t.Errorf("the %s is in the panel's log", name)
		}
	}
	if !strings.Contains(out, "revealed APIKey") || !strings.Contains(out, created.Status.KeyHint) {
		t.Errorf("the log does not record the reveal with the hint:\n%s", out)
	}
}

func TestForbiddenIsOneClearLine(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "forbidden")
	srv := startPanel(t, nil, panel.Deps{})

	t.Run("no rights at all", func(t *testing.T) {
		v := newVisitor(t, srv)
		p := v.signIn(grant(t, ns, "nobody", nil), ns)
		body := html.UnescapeString(p.body)
		if !strings.Contains(body, `you may not list apikeys.switchboard.dev in namespace "`+ns+`"`) {
			t.Fatalf("keys page for a user without rights: %d %q", p.status, body)
		}
		if !strings.Contains(body, `you may not list connections.switchboard.dev`) {
			t.Fatal("the Connections section does not name the missing permission")
		}
		if strings.Contains(p.body, "<select id=\"namespace\"") {
			t.Fatal("a user who may not list namespaces got a namespace list")
		}
		p = v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"sneaky"}, "expires": {""}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), `you may not create apikeys.switchboard.dev in namespace "`+ns+`"`) {
			t.Fatalf("create without rights: %d %q", p.status, errorLine(p.body))
		}
	})
	t.Run("may read but not create", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.signIn(grant(t, ns, "reader", readOnlyRules), ns)
		p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"sneaky"}, "expires": {""}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), `"create" on apikeys.switchboard.dev`) {
			t.Fatalf("create with read-only rights: %d %q", p.status, errorLine(p.body))
		}
		existing := &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "theirs")}
		if err := env.Client.Create(testCtx(t), existing); err != nil {
			t.Fatal(err)
		}
		p = v.get("/keys/rotate?namespace=" + ns + "&name=theirs")
		p = v.postCSRF("/keys/rotate", url.Values{"namespace": {ns}, "name": {"theirs"}, "grace": {"0s"}, "requested_at": {regexpValue(t, p.body, "requested_at")}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), "you may not patch apikeys.switchboard.dev") {
			t.Fatalf("rotate with read-only rights: %d %q", p.status, errorLine(p.body))
		}
		p = v.get("/keys/revoke?namespace=" + ns + "&name=theirs")
		p = v.postCSRF("/keys/revoke", url.Values{"namespace": {ns}, "name": {"theirs"}, "confirm": {"yes"}})
		if p.status != http.StatusForbidden || !strings.Contains(errorLine(p.body), "you may not patch apikeys.switchboard.dev") {
			t.Fatalf("revoke with read-only rights: %d %q", p.status, errorLine(p.body))
		}
		p = v.get("/keys/revoke?namespace=" + ns + "&name=sneaky")
		if p.status != http.StatusNotFound || !strings.Contains(errorLine(p.body), `APIKey "sneaky" not found`) {
			t.Fatalf("revoke of a missing key: %d %q", p.status, errorLine(p.body))
		}
	})
	t.Run("may create keys but not read Secrets", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.signIn(grant(t, ns, "creator", noSecretRules), ns)
		p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"hidden"}, "expires": {""}})
		line := errorLine(p.body)
		if p.status != http.StatusForbidden || revealedKey(p.body) != "" ||
			!strings.Contains(line, `you may not get secrets in namespace "`+ns+`"`) || !strings.Contains(line, "nothing was changed") {
			t.Fatalf("create without Secret rights: %d %q", p.status, line)
		}
		// Checked before anything changed: no APIKey is left whose key this person cannot see.
		var k switchboardv1alpha1.APIKey
		if err := env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "hidden"}, &k); !apierrors.IsNotFound(err) {
			t.Fatalf("the APIKey was created although its key could not be shown: %v", err)
		}
	})
	t.Run("may list namespaces", func(t *testing.T) {
		v := newVisitor(t, srv)
		v.signIn(grant(t, ns, "viewer", nil), ns)
		// The namespace list is cluster-wide: grant it with a ClusterRole.
		bindClusterNamespaceReader(t, ns, "viewer")
		// The API server's authorizer learns of the new binding through its informer, soon.
		var p page
		testenv.Eventually(t, 10*time.Second, "the namespace list shown", func() error {
			p = v.get("/keys?namespace=" + ns)
			if !strings.Contains(p.body, `<select id="namespace"`) {
				return errors.New("no namespace list")
			}
			return nil
		})
		if !strings.Contains(p.body, `<option value="`+systemNS+`"`) {
			t.Fatal("a user who may list namespaces gets no namespace list")
		}
	})
}

// TestOperatorTimeoutThenShowKey: a create whose key cannot be shown in time deletes its APIKey
// again. That changed on purpose when the panel and the plugin came to share one key workflow
// (internal/keyclient): the panel used to keep it, with a Show key button, while the plugin
// deleted it. A key made with kubectl apply still waits in the table to be shown, once.
func TestOperatorTimeoutThenShowKey(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "timeout")
	token := grant(t, ns, "owner", ownerRules)
	// A panel that waits no time at all stands for an operator that is not running.
	impatient := startPanel(t, nil, panel.Deps{RevealTimeout: time.Nanosecond})
	v := newVisitor(t, impatient)
	v.signIn(token, ns)
	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"slow"}, "expires": {""}})
	if p.status != http.StatusGatewayTimeout || !strings.Contains(errorLine(p.body), "operator may not be running") || revealedKey(p.body) != "" {
		t.Fatalf("create with an operator too slow: %d %q", p.status, errorLine(p.body))
	}
	if !strings.Contains(errorLine(p.body), "was deleted again") {
		t.Fatalf("the error does not say the APIKey was deleted again: %q", errorLine(p.body))
	}
	waitFor(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "slow"}, &switchboardv1alpha1.APIKey{}))
	})

	// Made with kubectl apply: once the operator has issued the key, the table offers to show it, once.
	if err := env.Client.Create(testCtx(t), &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "applied")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		var k switchboardv1alpha1.APIKey
		return env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "applied"}, &k) == nil && k.Status.RevealSecretName != ""
	})
	p = v.get("/keys?namespace=" + ns)
	if !strings.Contains(p.body, "Show key") {
		t.Fatal("a key waiting to be shown has no Show key button")
	}
	p = v.postCSRF("/keys/reveal", url.Values{"namespace": {ns}, "name": {"applied"}})
	key := revealedKey(p.body)
	if p.status != http.StatusOK || key == "" {
		t.Fatalf("show key: %d %q", p.status, errorLine(p.body))
	}
	requireHash(t, ns, "applied", key)
	p = v.postCSRF("/keys/reveal", url.Values{"namespace": {ns}, "name": {"applied"}})
	if revealedKey(p.body) != "" || p.status != http.StatusConflict {
		t.Fatalf("second show: %d %q", p.status, errorLine(p.body))
	}
}

// TestRotateStopsAStolenKey: another identity, who may get and delete the namespace's
// Secrets, claims the key a rotation asked for before the panel does. The panel (through the
// workflow it shares with the plugin) rotates again at once with no grace, shows the next key
// with a loud notice, and the stolen key, and the replaced one, stop working.
func TestRotateStopsAStolenKey(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "stolen")
	thiefToken := grant(t, ns, "thief", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}}})
	thiefClient, err := client.New(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, BearerToken: thiefToken},
		client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	thief := keyclienttest.NewThief(thiefClient)
	h, err := panel.NewHandler(&configv1alpha1.PanelSettings{}, nil, panel.Deps{RESTConfig: env.Config})
	if err != nil {
		t.Fatal(err)
	}
	panel.InterceptUserClients(h, thief.Intercept)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	v := newVisitor(t, srv)
	v.signIn(grant(t, ns, "owner", ownerRules), ns)

	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"ci"}, "expires": {""}})
	first := revealedKey(p.body)
	if first == "" {
		t.Fatalf("create: %d %q", p.status, errorLine(p.body))
	}
	thief.Arm(1)
	p = v.get("/keys/rotate?namespace=" + ns + "&name=ci")
	p = v.postCSRF("/keys/rotate", url.Values{"namespace": {ns}, "name": {"ci"}, "grace": {"1h"}, "requested_at": {regexpValue(t, p.body, "requested_at")}})
	next := revealedKey(p.body)
	if err := thief.Err(); err != nil || len(thief.Keys()) != 1 {
		t.Fatalf("the thief stole %d keys: %v", len(thief.Keys()), err)
	}
	stolen := thief.Keys()[0]
	if p.status != http.StatusOK || next == "" || next == stolen || next == first {
		t.Fatalf("rotate with a stolen key: %d %q, a fresh key shown: %v", p.status, errorLine(p.body), next != "" && next != stolen)
	}
	alarm := regexp.MustCompile(`(?s)id="stolen">(.*?)</p>`).FindStringSubmatch(p.body)
	if alarm == nil || !strings.Contains(alarm[1], apikey.Hint(stolen)) || !strings.Contains(alarm[1], apikey.Hint(first)) ||
		!strings.Contains(alarm[1], "no longer works") {
		t.Fatalf("the page does not say loudly which key was stolen and stopped: %q", alarm)
	}
	if strings.Contains(p.body, "previous key keeps working until") {
		t.Fatal("the page promises a grace period the stolen key's stop ended")
	}
	requireHash(t, ns, "ci", next)
	requireV1(t, next, http.StatusOK)
	requireV1(t, stolen, http.StatusUnauthorized)
	requireV1(t, first, http.StatusUnauthorized)
}
