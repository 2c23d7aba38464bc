//go:build !unit

package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// startLeakServer runs the server (as cfg's identity) with a leak reports listener of lr, and
// returns that listener's URL.
func startLeakServer(t *testing.T, cfg *rest.Config, lr leakreceiver.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if lr.Rate == 0 {
		lr.Rate, lr.Burst = 1000, 1000
	}
	startServer(t, cfg, Options{LeakReportsListener: l, LeakReports: lr}, true)
	return "http://" + l.Addr().String()
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
	url := startLeakServer(t, nil, leakreceiver.Config{Partner: true, PublicKeysURL: serveGitHubKeys(t, map[string]*ecdsa.PrivateKey{"k1": signer})})

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

// serveGitHubAPI plays GitHub's REST API for one secret scanning alert of repo, whose secret is
// token, for requests bearing apiToken; it returns its URL.
func serveGitHubAPI(t *testing.T, apiToken, repo string, number int, token string) string {
	t.Helper()
	alert := fmt.Sprintf("/repos/%s/secret-scanning/alerts/%d", repo, number)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+apiToken {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case alert:
			_ = json.NewEncoder(w).Encode(map[string]any{"number": number, "state": "open", "secret_type": "switchboard_api_key",
				"secret": token, "html_url": "https://github.com/" + repo + "/security/secret-scanning/" + fmt.Sprint(number)})
		case alert + "/locations":
			_ = json.NewEncoder(w).Encode([]map[string]any{{"type": "commit", "details": map[string]any{
				"path": "deploy/app.env", "start_line": 12, "commit_sha": "0123456789abcdef0123456789abcdef01234567"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// postAlert POSTs an organization's secret_scanning_alert webhook for repo's alert number,
// signed with secret.
func postAlert(t *testing.T, url string, secret []byte, repo string, number int) (int, string) {
	t.Helper()
	body := fmt.Appendf(nil, `{"action":"created","alert":{"number":%d,"secret_type":"switchboard_api_key"},"repository":{"full_name":%q,"html_url":"https://github.com/%s"}}`, number, repo, repo)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, url+leakreceiver.AlertsPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "secret_scanning_alert")
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestLeakReportsFromAnOrganizationsAlert: a webhook delivery signed with the organization's
// secret makes the server fetch the alert's token from GitHub's API and record it, with the
// alert as its reference; a delivery signed with another secret is 401 and records nothing.
func TestLeakReportsFromAnOrganizationsAlert(t *testing.T) {
	ns := env.Namespace(t, "leak-alert")
	leaked := newKey(t, ns, "leaked", switchboardv1alpha1.APIKeySpec{})
	secret, apiToken := []byte("the organization's webhook secret"), "github_pat_test"
	api := serveGitHubAPI(t, apiToken, "acme/app", 7, leaked.Key)
	url := startLeakServer(t, nil, leakreceiver.Config{WebhookSecret: secret, APIToken: apiToken, APIBaseURL: api})

	if status, body := postAlert(t, url, []byte("another secret"), "acme/app", 7); status != http.StatusUnauthorized {
		t.Fatalf("a delivery signed with another secret: %d %s, want 401", status, body)
	}
	if leakReport(t, leaked.Key) != nil {
		t.Fatal("a delivery signed with another secret was recorded")
	}
	status, body := postAlert(t, url, secret, "acme/app", 7)
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
	url := startLeakServer(t, cfg, leakreceiver.Config{Partner: true, PublicKeysURL: serveGitHubKeys(t, map[string]*ecdsa.PrivateKey{"k1": signer})})
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

// TestLeakReportsAreRateLimited: past the listener's burst, a request is 429 before its body is
// read or its signature checked (the limiter is the listener's, over all senders).
func TestLeakReportsAreRateLimited(t *testing.T) {
	url := startLeakServer(t, nil, leakreceiver.Config{Partner: true, PublicKeysURL: "http://127.0.0.1:1/keys", Rate: 0.001, Burst: 1})
	post := func() (int, string) {
		req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, url+leakreceiver.PartnerPath, strings.NewReader("[]"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if status, _ := post(); status != http.StatusUnauthorized {
		t.Fatalf("an unsigned request within the burst: %d, want 401", status)
	}
	if status, retry := post(); status != http.StatusTooManyRequests || retry == "" {
		t.Fatalf("past the burst: %d (Retry-After %q), want 429 with Retry-After", status, retry)
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
	s := startServer(t, nil, Options{SystemNamespace: sys, FailureRate: -1, LeakReportsListener: l, LeakReports: leakreceiver.Config{
		Partner: true, PublicKeysURL: serveGitHubKeys(t, map[string]*ecdsa.PrivateKey{"k1": signer}), Rate: 1000, Burst: 1000,
	}}, true)

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
}
