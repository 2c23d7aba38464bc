package secretscanning

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

var webhookSecret = []byte("the organization's webhook secret")

func hubSignature(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestVerifyHub(t *testing.T) {
	body := []byte(`{"action":"created"}`)
	good := hubSignature(webhookSecret, body)
	tests := []struct {
		name   string
		header string
		body   []byte
		ok     bool
	}{
		{"valid", good, body, true},
		{"no header", "", body, false},
		{"without sha256=", strings.TrimPrefix(good, "sha256="), body, false},
		{"sha1=", "sha1=" + strings.TrimPrefix(good, "sha256="), body, false},
		{"upper-case prefix", "SHA256=" + strings.TrimPrefix(good, "sha256="), body, false},
		{"wrong secret", hubSignature([]byte("another secret"), body), body, false},
		{"a bit flipped in the body", good, flip(body, 3), false},
		{"truncated", good[:len(good)-2], body, false},
		{"not hex", "sha256=" + strings.Repeat("zz", 32), body, false},
		{"empty body's signature", hubSignature(webhookSecret, nil), body, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verifyHub(webhookSecret, tt.header, tt.body)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrUnauthenticated)) {
				t.Errorf("verifyHub() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func alertPayloadJSON(action, repo string, number int) []byte {
	return fmt.Appendf(nil, `{"action":%q,"alert":{"number":%d,"secret_type":"switchboard_api_key","html_url":"https://github.com/%s/security/secret-scanning/%d"},`+
		`"repository":{"full_name":%q,"html_url":"https://github.com/%s"},"organization":{"login":"octo"},"sender":{"login":"octocat"}}`,
		action, number, repo, number, repo, repo)
}

func webhookRequest(event string, body []byte, sig string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/github/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if sig != "" {
		r.Header.Set("X-Hub-Signature-256", sig)
	}
	return r
}

func TestAlertWebhookRead(t *testing.T) {
	w, err := NewAlertWebhook(AlertWebhookOptions{Secret: webhookSecret, MaxBody: 1024})
	if err != nil {
		t.Fatal(err)
	}
	signed := func(b []byte) string { return hubSignature(webhookSecret, b) }
	created := alertPayloadJSON("created", "octo/app", 42)
	big := alertPayloadJSON("created", "octo/"+strings.Repeat("a", 100), 1)
	big = append(big, bytes.Repeat([]byte(" "), 1024)...)
	noNumber := []byte(`{"action":"created","alert":{},"repository":{"full_name":"octo/app"}}`)
	badRepo := alertPayloadJSON("created", "../etc", 1)

	tests := []struct {
		name        string
		event       string
		body        []byte
		sig         string
		contentType string
		want        error
		act         bool
		ignored     string
	}{
		{name: "created", event: "secret_scanning_alert", body: created, sig: signed(created), act: true},
		{name: "reopened", event: "secret_scanning_alert", body: alertPayloadJSON("reopened", "octo/app", 42), sig: signed(alertPayloadJSON("reopened", "octo/app", 42)), act: true},
		{name: "publicly leaked", event: "secret_scanning_alert", body: alertPayloadJSON("publicly_leaked", "octo/app", 42), sig: signed(alertPayloadJSON("publicly_leaked", "octo/app", 42)), act: true},
		{name: "resolved", event: "secret_scanning_alert", body: alertPayloadJSON("resolved", "octo/app", 42), sig: signed(alertPayloadJSON("resolved", "octo/app", 42)), ignored: `action "resolved" reports no leak`},
		{name: "validated", event: "secret_scanning_alert", body: alertPayloadJSON("validated", "octo/app", 42), sig: signed(alertPayloadJSON("validated", "octo/app", 42)), ignored: `action "validated"`},
		{name: "ping", event: "ping", body: []byte(`{"zen":"Keep it logically awesome."}`), sig: signed([]byte(`{"zen":"Keep it logically awesome."}`)), ignored: "ping"},
		{name: "another event", event: "push", body: created, sig: signed(created), ignored: `event "push" is not secret_scanning_alert`},
		{name: "wrong secret", event: "secret_scanning_alert", body: created, sig: hubSignature([]byte("guess"), created), want: ErrUnauthenticated},
		{name: "no signature", event: "secret_scanning_alert", body: created, want: ErrUnauthenticated},
		{name: "unsigned ping", event: "ping", body: []byte(`{}`), want: ErrUnauthenticated},
		{name: "signature without sha256=", event: "secret_scanning_alert", body: created, sig: strings.TrimPrefix(signed(created), "sha256="), want: ErrUnauthenticated},
		{name: "body over the limit", event: "secret_scanning_alert", body: big, sig: signed(big), want: ErrTooLarge},
		{name: "form-encoded", event: "secret_scanning_alert", body: created, sig: signed(created), contentType: "application/x-www-form-urlencoded", want: ErrMalformed},
		{name: "no alert number", event: "secret_scanning_alert", body: noNumber, sig: signed(noNumber), want: ErrMalformed},
		{name: "a repository name that is a path", event: "secret_scanning_alert", body: badRepo, sig: signed(badRepo), want: ErrMalformed},
		{name: "signed garbage", event: "secret_scanning_alert", body: []byte("{"), sig: signed([]byte("{")), want: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := webhookRequest(tt.event, tt.body, tt.sig)
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			ev, err := w.Read(r)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Read() = %+v, %v; want error %v", ev, err, tt.want)
			}
			if err != nil {
				if ev.Act() && ev.Alert != (AlertRef{}) {
					t.Errorf("Read() refused the delivery but named an alert: %+v", ev.Alert)
				}
				return
			}
			if ev.Act() != tt.act || !strings.Contains(ev.Ignored, tt.ignored) {
				t.Errorf("Read() = act %v, ignored %q; want act %v, ignored containing %q", ev.Act(), ev.Ignored, tt.act, tt.ignored)
			}
			if ev.Delivery != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || ev.Event != tt.event {
				t.Errorf("Read() delivery %q event %q", ev.Delivery, ev.Event)
			}
			if tt.act {
				want := AlertRef{Repository: "octo/app", RepositoryURL: "https://github.com/octo/app", Number: 42}
				if ev.Alert != want || ev.Alert.ID() != "octo/app#42" {
					t.Errorf("Read() alert = %+v (%s), want %+v", ev.Alert, ev.Alert.ID(), want)
				}
			}
		})
	}
}

func TestNewAlertWebhookRefusesNoSecret(t *testing.T) {
	if _, err := NewAlertWebhook(AlertWebhookOptions{}); err == nil || !strings.Contains(err.Error(), "no secret") {
		t.Errorf("NewAlertWebhook(no secret) = %v", err)
	}
}

// fakeAPI plays GitHub's REST API for secret scanning alerts, under base (as a GitHub
// Enterprise Server serves it under /api/v3).
type fakeAPI struct {
	t         *testing.T
	base      string
	token     string
	alert     string // the answer to GET …/alerts/42
	locations string // the answer to GET …/alerts/42/locations
	status    int    // of the alert, when not 200
	block     bool   // answer nothing until the request is cancelled
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.block {
		<-r.Context().Done()
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+f.token {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != APIVersion {
		http.Error(w, `{"message":"bad headers"}`, http.StatusBadRequest)
		return
	}
	switch r.URL.Path {
	case f.base + "/repos/octo/app/secret-scanning/alerts/42":
		if f.status != 0 {
			http.Error(w, `{"message":"Not Found"}`, f.status)
			return
		}
		_, _ = w.Write([]byte(f.alert))
	case f.base + "/repos/octo/app/secret-scanning/alerts/42/locations":
		if r.URL.Query().Get("per_page") != "1" {
			f.t.Errorf("locations asked without per_page=1: %s", r.URL.RawQuery)
		}
		if f.locations == "" {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(f.locations))
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
}

func TestAlertClientFetch(t *testing.T) {
	ours, foreign, _ := testTokens(t)
	alertJSON := func(secret string) string {
		return fmt.Sprintf(`{"number":42,"created_at":"2026-11-27T20:00:00Z","url":"https://ghe.example/api/v3/repos/octo/app/secret-scanning/alerts/42",`+
			`"html_url":"https://ghe.example/octo/app/security/secret-scanning/42","locations_url":"https://ghe.example/api/v3/repos/octo/app/secret-scanning/alerts/42/locations",`+
			`"state":"open","resolution":null,"secret_type":"switchboard_api_key","secret_type_display_name":"switchboard API key","secret":%q,"validity":"unknown"}`, secret)
	}
	commit := `[{"type":"commit","details":{"path":"/deploy/app.env","start_line":7,"end_line":7,"start_column":9,"end_column":66,` +
		`"blob_sha":"af5626b4a114abcb82d63db7c8082c3c4756e51b","blob_url":"https://ghe.example/api/v3/repos/octo/app/git/blobs/af5626b4a114abcb82d63db7c8082c3c4756e51b",` +
		`"commit_sha":"f14d7debf9775f957cf4f1e8176da0786431f72b","commit_url":"https://ghe.example/api/v3/repos/octo/app/git/commits/f14d7debf9775f957cf4f1e8176da0786431f72b"}}]`
	issue := `[{"type":"issue_comment","details":{"issue_comment_url":"https://ghe.example/api/v3/repos/octo/app/issues/comments/1081119451"}}]`
	ref := AlertRef{Repository: "octo/app", RepositoryURL: "https://ghe.example/octo/app", Number: 42}

	tests := []struct {
		name       string
		api        fakeAPI
		ref        AlertRef
		maxBody    int64
		want       error
		candidate  bool
		url, token string
		source     string
	}{
		{name: "a key of ours, found in a commit", api: fakeAPI{alert: alertJSON(ours), locations: commit}, ref: ref, candidate: true, token: ours, source: "commit",
			url: "https://ghe.example/octo/app/blob/f14d7debf9775f957cf4f1e8176da0786431f72b/deploy/app.env#L7"},
		{name: "found in an issue comment", api: fakeAPI{alert: alertJSON(ours), locations: issue}, ref: ref, candidate: true, token: ours, source: "issue_comment",
			url: "https://ghe.example/api/v3/repos/octo/app/issues/comments/1081119451"},
		{name: "commit without the repository's page", api: fakeAPI{alert: alertJSON(ours), locations: commit}, ref: AlertRef{Repository: "octo/app", Number: 42}, candidate: true, token: ours, source: "commit",
			url: "https://ghe.example/api/v3/repos/octo/app/git/blobs/af5626b4a114abcb82d63db7c8082c3c4756e51b"},
		{name: "locations unavailable: the alert's page", api: fakeAPI{alert: alertJSON(ours)}, ref: ref, candidate: true, token: ours,
			url: "https://ghe.example/octo/app/security/secret-scanning/42"},
		{name: "another prefix", api: fakeAPI{alert: alertJSON(foreign), locations: commit}, ref: ref, token: foreign, source: "commit",
			url: "https://ghe.example/octo/app/blob/f14d7debf9775f957cf4f1e8176da0786431f72b/deploy/app.env#L7"},
		{name: "no such alert, or no permission", api: fakeAPI{status: http.StatusNotFound}, ref: ref, want: ErrUnavailable},
		{name: "an alert without its secret", api: fakeAPI{alert: alertJSON("")}, ref: ref, want: ErrBadGateway},
		{name: "not JSON", api: fakeAPI{alert: "<html>"}, ref: ref, want: ErrBadGateway},
		{name: "JSON of another shape", api: fakeAPI{alert: `[{"secret":"x"}]`}, ref: ref, want: ErrBadGateway},
		{name: "GitHub fails", api: fakeAPI{status: http.StatusBadGateway}, ref: ref, want: ErrUnavailable},
		{name: "an answer over the bound", api: fakeAPI{alert: alertJSON(ours)}, ref: ref, maxBody: 100, want: ErrBadGateway},
		{name: "a repository name that is a path", api: fakeAPI{alert: alertJSON(ours)}, ref: AlertRef{Repository: "../app", Number: 42}, want: ErrMalformed},
		{name: "no number", api: fakeAPI{alert: alertJSON(ours)}, ref: AlertRef{Repository: "octo/app"}, want: ErrMalformed},
		{name: "GitHub does not answer", api: fakeAPI{block: true}, ref: ref, want: ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.api.t, tt.api.base, tt.api.token = t, "/api/v3", "ghs_test_token"
			srv := httptest.NewServer(&tt.api)
			defer srv.Close()
			c, err := NewAlertClient(AlertClientOptions{APIBase: srv.URL + "/api/v3/", Token: "ghs_test_token", Client: srv.Client(), Prefix: "sb",
				MaxBody: tt.maxBody, Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Fetch(context.Background(), tt.ref)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Fetch() = %+v, %v; want error %v", a, err, tt.want)
			}
			if err != nil {
				if strings.Contains(err.Error(), ours) || strings.Contains(err.Error(), "ghs_test_token") {
					t.Errorf("the error holds a secret: %v", err)
				}
				return
			}
			if a.Candidate() != tt.candidate || a.Hash != apikey.Sum(tt.token) || a.URL != tt.url || a.Source != tt.source || a.Type != "switchboard_api_key" || a.State != "open" {
				t.Errorf("Fetch() = %+v, want candidate %v, url %q, source %q", a, tt.candidate, tt.url, tt.source)
			}
			if strings.Contains(fmt.Sprintf("%+v", a), tt.token) {
				t.Error("the fetched alert holds its token's plaintext")
			}
		})
	}
}

func TestNewAlertClientRefusesBadInput(t *testing.T) {
	tests := []struct {
		opts AlertClientOptions
		want string
	}{
		{AlertClientOptions{Token: "t", APIBase: "github.example/api/v3"}, "absolute http(s) URL"},
		{AlertClientOptions{Token: "t", APIBase: "https://h/api/v3?x=1"}, "without a query"},
		{AlertClientOptions{}, "no token"},
		{AlertClientOptions{Token: "t", Prefix: "SB"}, "prefix"},
		{AlertClientOptions{Token: "t", Timeout: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		if _, err := NewAlertClient(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewAlertClient(%+v) = %v, want an error saying %q", tt.opts, err, tt.want)
		}
	}
}

func FuzzParseAlertEvent(f *testing.F) {
	f.Add(alertPayloadJSON("created", "octo/app", 42))
	f.Add(alertPayloadJSON("resolved", "octo/app", 1))
	f.Add([]byte(`{"action":"created","alert":{"number":-1},"repository":{"full_name":"a/b"}}`))
	f.Add([]byte(`{"action":"created","alert":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := parseAlertEvent(AlertEvent{Event: "secret_scanning_alert"}, body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("parseAlertEvent() = %v, not ErrMalformed", err)
			}
			return
		}
		if ev.Act() && (ev.Alert.Number <= 0 || !validRepository(ev.Alert.Repository)) {
			t.Fatalf("parseAlertEvent() acts on %+v", ev.Alert)
		}
	})
}
