//go:build !unit

package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/scheme"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// githubKeys is a test P-256 key pair, as GitHub signs partner program requests with.
func githubKeys(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// serveGitHubKeys serves keys (by identifier) in GitHub's format and returns its URL.
func serveGitHubKeys(t *testing.T, keys map[string]*ecdsa.PrivateKey) string {
	t.Helper()
	type key struct {
		KeyIdentifier string `json:"key_identifier"`
		Key           string `json:"key"`
		IsCurrent     bool   `json:"is_current"`
	}
	var doc struct {
		PublicKeys []key `json:"public_keys"`
	}
	for id, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		doc.PublicKeys = append(doc.PublicKeys, key{KeyIdentifier: id, Key: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), IsCurrent: true})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// leakSection is a leakReports section whose verified requests are bounded for no test's pace
// (rate and burst 1000), and which serves the partner program with the keys at keysURL ("":
// not at all).
func leakSection(keysURL string) configv1alpha1.LeakReports {
	lr := configv1alpha1.LeakReports{Rate: ptr.To(1000.0), Burst: ptr.To[int32](1000)}
	if keysURL != "" {
		lr.Partner = configv1alpha1.LeakReportsPartner{Enabled: true, PublicKeysURL: keysURL}
	}
	return lr
}

// alertsWithoutCatchUp serves an organization's alerts, verified with secret, their tokens
// fetched with apiToken, and without the catch-up (no organization): what a configuration does
// not allow, and the tests of the receiver's door need (Deps.LeakReceiver).
func alertsWithoutCatchUp(secret []byte, apiToken string) func(*leakreceiver.Config) {
	return func(c *leakreceiver.Config) { c.WebhookSecret, c.APIToken = secret, apiToken }
}

// startLeakServer runs the server (as cfg's identity) with c and deps, its leak reports listener
// on every loopback address (127.0.0.2 and up are other clients), and returns that listener's
// URL.
func startLeakServer(t *testing.T, cfg *rest.Config, c *sc, deps Deps) string {
	t.Helper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	deps.LeakReportsListener = l
	startServer(t, cfg, c, deps, true)
	return fmt.Sprintf("http://127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}

type match struct {
	Token  string `json:"token"`
	Type   string `json:"type"`
	URL    string `json:"url"`
	Source string `json:"source"`
}

type feedback struct {
	TokenHash string `json:"token_hash"`
	TokenType string `json:"token_type"`
	Label     string `json:"label"`
}

// postPartner POSTs matches as GitHub's partner program does, signed by k as id (the body
// changed after signing when tamper is set), and returns the status and the feedback.
func postPartner(t *testing.T, url string, matches []match, id string, k *ecdsa.PrivateKey, tamper bool) (int, []feedback) {
	t.Helper()
	body, err := json.Marshal(matches)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(body)
	sig, err := ecdsa.SignASN1(rand.Reader, k, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if tamper {
		body = bytes.Replace(body, []byte(`"content"`), []byte(`"contenu"`), 1)
	}
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, url+leakreceiver.PartnerPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Github-Public-Key-Identifier", id)
	req.Header.Set("Github-Public-Key-Signature", base64.StdEncoding.EncodeToString(sig))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var fb []feedback
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &fb); err != nil {
			t.Fatalf("the feedback is not GitHub's format: %v: %s", err, raw)
		}
	}
	return resp.StatusCode, fb
}

// leakReport is the LeakReport of key, or nil when there is none.
func leakReport(t *testing.T, key string) *switchboardv1alpha1.LeakReport {
	t.Helper()
	h := apikey.Sum(key)
	lr := &switchboardv1alpha1.LeakReport{}
	err := env.Client.Get(ctx(t), client.ObjectKey{Namespace: systemNamespace, Name: switchboardv1alpha1.LeakReportName(h.String())}, lr)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return lr
}

func labels(fb []feedback) []string {
	out := make([]string, len(fb))
	for i, f := range fb {
		out[i] = f.Label
	}
	return out
}

// TestLeakReportsFromThePartnerProgram: a report signed with the key GitHub publishes is
// recorded once, as one LeakReport of the leaked key's hash, and answered true_positive (again
// when it comes again); forged, unknown-key, foreign, bad-checksum and never-issued reports
// record nothing.
func TestLeakReportsFromThePartnerProgram(t *testing.T) {
	ns := env.Namespace(t, "leak-partner")
	leaked := newKey(t, ns, "leaked", switchboardv1alpha1.APIKeySpec{})
	forged := newKey(t, ns, "forged", switchboardv1alpha1.APIKeySpec{})
	signer := githubKeys(t)
	url := startLeakServer(t, nil, &sc{LeakReports: leakSection(serveGitHubKeys(t, map[string]*ecdsa.PrivateKey{"k1": signer}))}, Deps{})

	report := []match{{Token: leaked.Key, Type: "switchboard_api_key", URL: "https://github.com/acme/app/blob/abc/config.env#L3", Source: "content"}}
	for i := range 2 { // the second time is GitHub sending the same request again
		status, fb := postPartner(t, url, report, "k1", signer, false)
		if status != http.StatusOK || len(fb) != 1 || fb[0].Label != "true_positive" || fb[0].TokenHash != apikey.Sum(leaked.Key).String() || fb[0].TokenType != "switchboard_api_key" {
			t.Fatalf("report %d: %d %+v, want 200 and true_positive for the key's hash", i+1, status, fb)
		}
	}
	lr := leakReport(t, leaked.Key)
	if lr == nil {
		t.Fatal("no LeakReport of the reported key")
	}
	s := lr.Spec
	if s.KeyHash != apikey.Sum(leaked.Key).String() || s.KeyHint != apikey.Hint(leaked.Key) || s.Source != switchboardv1alpha1.LeakSourceGitHubPartner ||
		s.URL != report[0].URL || s.Location != "content" || s.Reference != "" || s.ReportedAt.IsZero() {
		t.Errorf("the LeakReport says %+v", s)
	}
	if strings.Contains(fmt.Sprint(lr), leaked.Key) {
		t.Error("the LeakReport holds the key's plaintext")
	}
	var all switchboardv1alpha1.LeakReportList
	if err := env.Client.List(ctx(t), &all, client.InNamespace(systemNamespace)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range all.Items {
		if r.Spec.KeyHash == s.KeyHash {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d LeakReports of the key reported twice, want 1", n)
	}

	// Forged: the body changed after GitHub's key signed it; signed by a key GitHub does not publish.
	other := githubKeys(t)
	forgedReport := []match{{Token: forged.Key, Type: "switchboard_api_key", URL: "https://github.com/acme/app", Source: "content"}}
	for name, post := range map[string]func() (int, []feedback){
		"a body changed after signing":  func() (int, []feedback) { return postPartner(t, url, forgedReport, "k1", signer, true) },
		"a key GitHub does not publish": func() (int, []feedback) { return postPartner(t, url, forgedReport, "k2", other, false) },
		"another key under GitHub's identifier": func() (int, []feedback) {
			return postPartner(t, url, forgedReport, "k1", other, false)
		},
	} {
		if status, _ := post(); status != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, status)
		}
	}
	if leakReport(t, forged.Key) != nil {
		t.Error("a forged report was recorded")
	}

	// Foreign, bad checksum, never issued: false positives, signed by GitHub all the same.
	foreign, err := apikey.Generate("ghp")
	if err != nil {
		t.Fatal(err)
	}
	neverIssued, err := apikey.Generate(apikey.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	badChecksum := forged.Key[:len(forged.Key)-1] + map[bool]string{true: "A", false: "B"}[!strings.HasSuffix(forged.Key, "A")]
	falsePositives := []match{
		{Token: foreign, Type: "t", URL: "u", Source: "content"},
		{Token: badChecksum, Type: "t", URL: "u", Source: "content"},
		{Token: neverIssued, Type: "t", URL: "u", Source: "content"},
	}
	status, fb := postPartner(t, url, falsePositives, "k1", signer, false)
	if status != http.StatusOK || strings.Join(labels(fb), ",") != "false_positive,false_positive,false_positive" {
		t.Fatalf("false positives: %d %v", status, labels(fb))
	}
	for _, m := range falsePositives {
		if leakReport(t, m.Token) != nil {
			t.Errorf("a false positive (%s) was recorded", apikey.Hint(m.Token))
		}
	}
	if leakReport(t, forged.Key) != nil {
		t.Error("a key one character from the forged report's was recorded as it")
	}
}

// TestLeakReportsFromAnOrganizationsAlert: a webhook delivery signed with the organization's
// secret makes the server fetch the alert's token from GitHub's API and record it, with the
// alert as its reference; a delivery signed with another secret is 401 and records nothing.
// The same alert delivered again (GitHub's redelivery, a later action, anyone's replay of a
// captured delivery) is answered as the first was, with no call to GitHub's API nor to the
// API server.
func TestLeakReportsFromAnOrganizationsAlert(t *testing.T) {
	ns := env.Namespace(t, "leak-alert")
	leaked := newKey(t, ns, "leaked", switchboardv1alpha1.APIKeySpec{})
	secret, apiToken := []byte("the organization's webhook secret"), "github_pat_test"
	api := newGitHubAPI(t, apiToken)
	api.add("acme/app", 7, leaked.Key)
	creates := &countingTransport{path: "/leakreports"}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(creates.wrap)
	section := leakSection("")
	section.OrganizationAlerts.APIBaseURL = api.url
	url := startLeakServer(t, cfg, &sc{LeakReports: section}, Deps{LeakReceiver: alertsWithoutCatchUp(secret, apiToken)})
	github := from("127.0.0.2")

	if status, body := send(t, github, alertDelivery(t, url, []byte("another secret"), "created", "acme/app", 7, "d-0")); status != http.StatusUnauthorized {
		t.Fatalf("a delivery signed with another secret: %d %s, want 401", status, body)
	}
	if leakReport(t, leaked.Key) != nil || api.total() != 0 {
		t.Fatalf("a delivery signed with another secret was recorded, or cost %d requests to GitHub's API", api.total())
	}
	status, body := send(t, github, alertDelivery(t, url, secret, "created", "acme/app", 7, "d-1"))
	if status != http.StatusOK || !strings.Contains(body, `"result":"recorded"`) {
		t.Fatalf("the alert: %d %s, want 200 recorded", status, body)
	}
	lr := leakReport(t, leaked.Key)
	if lr == nil {
		t.Fatal("no LeakReport of the alert's key")
	}
	s := lr.Spec
	if s.Source != switchboardv1alpha1.LeakSourceGitHubAlert || s.Reference != "acme/app#7" || s.KeyHint != apikey.Hint(leaked.Key) ||
		s.URL != "https://github.com/acme/app/blob/0123456789abcdef0123456789abcdef01234567/deploy/app.env#L12" || s.Location != "commit" {
		t.Errorf("the LeakReport says %+v", s)
	}
	restCalls, apiCalls := api.total(), creates.count()
	if restCalls != 2 || apiCalls != 1 {
		t.Fatalf("the first delivery cost %d requests to GitHub's API and %d creates, want 2 and 1", restCalls, apiCalls)
	}

	for _, replay := range []struct{ what, action, delivery string }{
		{"GitHub's redelivery", "created", "d-1"},
		{"a replay under another delivery id", "created", "d-forged"},
		{"the alert reopened", "reopened", "d-2"},
		{"the alert found in public", "publicly_leaked", "d-3"},
	} {
		for range 5 {
			status, body := send(t, github, alertDelivery(t, url, secret, replay.action, "acme/app", 7, replay.delivery))
			if status != http.StatusOK || !strings.Contains(body, `"result":"recorded"`) || !strings.Contains(body, `"alert":"acme/app#7"`) {
				t.Fatalf("%s: %d %s, want 200 recorded as the first", replay.what, status, body)
			}
		}
	}
	if n, m := api.total()-restCalls, creates.count()-apiCalls; n != 0 || m != 0 {
		t.Errorf("20 deliveries of an alert handled before cost %d requests to GitHub's API and %d to the API server, want 0 and 0", n, m)
	}
}

// countingTransport counts the POSTs whose path ends in path, made through the config it wraps.
type countingTransport struct {
	path string
	mu   sync.Mutex
	n    int
	next http.RoundTripper
}

func (c *countingTransport) wrap(rt http.RoundTripper) http.RoundTripper {
	c.next = rt
	return c
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, c.path) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

func (c *countingTransport) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestLeakReportsRBACIsCreateOnly: the server, holding the chart's grants with leak reports
// enabled (create LeakReports in the system namespace, nothing more on them), records a report;
// that identity can neither read, change nor delete a LeakReport, nor create one in a tenant's
// namespace.
func TestLeakReportsRBACIsCreateOnly(t *testing.T) {
	ns := env.Namespace(t, "leak-rbac")
	leaked := newKey(t, ns, "leaked", switchboardv1alpha1.APIKeySpec{})
	cfg := serviceAccountConfig(t, true, withLeakReports)
	signer := githubKeys(t)
	url := startLeakServer(t, cfg, &sc{LeakReports: leakSection(serveGitHubKeys(t, map[string]*ecdsa.PrivateKey{"k1": signer}))}, Deps{})
	report := []match{{Token: leaked.Key, Type: "switchboard_api_key", URL: "https://github.com/acme/app", Source: "content"}}
	if status, fb := postPartner(t, url, report, "k1", signer, false); status != http.StatusOK || strings.Join(labels(fb), ",") != "true_positive" {
		t.Fatalf("with the chart's grants: %d %v", status, labels(fb))
	}
	lr := leakReport(t, leaked.Key)
	if lr == nil {
		t.Fatal("no LeakReport with the chart's grants")
	}

	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(lr)
	tenant := &switchboardv1alpha1.LeakReport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lr.Name}, Spec: lr.Spec}
	changed := lr.DeepCopy()
	changed.Labels = map[string]string{"changed": "true"}
	for what, err := range map[string]error{
		"get":                   c.Get(ctx(t), key, &switchboardv1alpha1.LeakReport{}),
		"list":                  c.List(ctx(t), &switchboardv1alpha1.LeakReportList{}, client.InNamespace(systemNamespace)),
		"update":                c.Update(ctx(t), changed),
		"update the status":     c.Status().Update(ctx(t), changed),
		"delete":                c.Delete(ctx(t), lr.DeepCopy()),
		"create in a namespace": c.Create(ctx(t), tenant),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the server's identity could %s a LeakReport: %v, want Forbidden", what, err)
		}
	}
}

// TestGitHubReportRefusesTheKeyWithinOneSecond is the whole loop with the real operator: a
// delivered key works on /v1; GitHub's partner program reports it (signed as GitHub does) to
// the server's leak reports listener; within a second of the request the key is refused on /v1,
// and its delivery Secret then holds a replacement that works.
func TestGitHubReportRefusesTheKeyWithinOneSecond(t *testing.T) {
	sys := env.Namespace(t, "leak-gh-system")
	ns := env.Namespace(t, "leak-gh")
	startOperator(t, sys, ns)
	signer := githubKeys(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	keysURL := serveGitHubKeys(t, map[string]*ecdsa.PrivateKey{"k1": signer})
	s := startServer(t, nil, noFailureLimit(&sc{SystemNamespace: sys, LeakReports: leakSection(keysURL)}), Deps{LeakReportsListener: l}, true)

	ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: switchboardv1alpha1.APIKeySpec{SecretName: "app-key"}}
	if err := env.Client.Create(ctx(t), ak); err != nil {
		t.Fatal(err)
	}
	leaked := deliveredKey(t, s, ns, "app-key", "1")

	start := time.Now()
	report := []match{{Token: leaked, Type: "switchboard_api_key", URL: "https://github.com/acme/app/blob/abc/.env#L1", Source: "content"}}
	if status, fb := postPartner(t, "http://"+l.Addr().String(), report, "k1", signer, false); status != http.StatusOK || strings.Join(labels(fb), ",") != "true_positive" {
		t.Fatalf("GitHub's report: %d %v", status, labels(fb))
	}
	for s.get(t, "/v1/connections", leaked).Status != http.StatusUnauthorized {
		if time.Since(start) > time.Second {
			t.Fatal("the leaked key is still accepted 1s after GitHub reported it")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the leaked key was refused on /v1 %v after GitHub's report was sent", time.Since(start).Round(100*time.Microsecond))
	if next := deliveredKey(t, s, ns, "app-key", "2"); next == leaked {
		t.Fatal("the delivery Secret still holds the leaked key")
	}

	// The same report again, once the operator has replaced the key (which no longer
	// authenticates): a true leak, recorded already, by this replica and by a new one, which
	// knows it from the hash Secret's record alone.
	again := startLeakServer(t, nil, noFailureLimit(&sc{SystemNamespace: sys, LeakReports: leakSection(keysURL)}), Deps{})
	for name, url := range map[string]string{"the replica that recorded it": "http://" + l.Addr().String(), "a new replica": again} {
		if status, fb := postPartner(t, url, report, "k1", signer, false); status != http.StatusOK || strings.Join(labels(fb), ",") != "true_positive" {
			t.Errorf("the report again, to %s: %d %v, want true_positive", name, status, labels(fb))
		}
	}
	var all switchboardv1alpha1.LeakReportList
	if err := env.Client.List(ctx(t), &all, client.InNamespace(sys)); err != nil || len(all.Items) != 1 {
		t.Errorf("%d LeakReports (%v) after the report came three times, want 1", len(all.Items), err)
	}
}
