//go:build !unit

package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// gitHubAPI plays GitHub's REST API for secret scanning alerts: each alert of a repository
// and its secret, the alert's locations, and the organization's list of open alerts (paged,
// newest first, the next page linked by the organization's number as GitHub does). It counts
// the requests, by kind, as the token's budget would.
type gitHubAPI struct {
	t     *testing.T
	url   string
	token string

	mu      sync.Mutex
	alerts  map[string]string // "owner/repo#n" → secret
	order   []string          // newest last
	calls   map[string]int    // "alert", "locations", "list"
	answer  string            // when set, the answer to every request (not GitHub's format)
	status  int               // when set, the status of every request
	perPage int               // when set, the list's page size instead of the request's per_page
}

func newGitHubAPI(t *testing.T, token string) *gitHubAPI {
	t.Helper()
	g := &gitHubAPI{t: t, token: token, alerts: map[string]string{}, calls: map[string]int{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// add makes alert number of repo, whose secret is secret, open.
func (g *gitHubAPI) add(repo string, number int, secret string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("%s#%d", repo, number)
	g.alerts[id] = secret
	g.order = append(g.order, id)
}

// requests is how many requests of kind ("alert", "locations", "list") the API was asked.
func (g *gitHubAPI) requests(kind string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[kind]
}

// total is how many requests the API was asked.
func (g *gitHubAPI) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.calls {
		n += c
	}
	return n
}

func (g *gitHubAPI) set(status int, answer string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status, g.answer = status, answer
}

func (g *gitHubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	path := r.URL.Path
	kind := "alert"
	switch {
	case strings.HasPrefix(path, "/orgs/") || strings.HasPrefix(path, "/organizations/"):
		kind = "list"
	case strings.HasSuffix(path, "/locations"):
		kind = "locations"
	}
	g.calls[kind]++
	if g.status != 0 || g.answer != "" {
		w.WriteHeader(max(g.status, http.StatusOK))
		_, _ = io.WriteString(w, g.answer)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch kind {
	case "list":
		g.list(w, r)
	case "locations":
		_ = json.NewEncoder(w).Encode([]map[string]any{{"type": "commit", "details": map[string]any{
			"path": "deploy/app.env", "start_line": 12, "commit_sha": "0123456789abcdef0123456789abcdef01234567"}}})
	default:
		// /repos/{owner}/{repo}/secret-scanning/alerts/{n}
		rest, _ := strings.CutPrefix(path, "/repos/")
		repo, n, _ := strings.Cut(rest, "/secret-scanning/alerts/")
		secret, ok := g.alerts[repo+"#"+n]
		if !ok {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		number, _ := strconv.Atoi(n)
		_ = json.NewEncoder(w).Encode(map[string]any{"number": number, "state": "open", "secret_type": "switchboard_api_key",
			"secret": secret, "html_url": "https://github.com/" + repo + "/security/secret-scanning/" + n})
	}
}

// list answers a page of the organization's open alerts, newest first.
func (g *gitHubAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("state") != "open" || q.Get("hide_secret") != "false" {
		g.t.Errorf("alerts listed with %s, want state=open and hide_secret=false", r.URL.RawQuery)
	}
	per, _ := strconv.Atoi(q.Get("per_page"))
	if g.perPage != 0 {
		per = g.perPage
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	var items []map[string]any
	for i := len(g.order) - 1 - (page-1)*per; i >= 0 && i > len(g.order)-1-page*per; i-- {
		repo, n, _ := strings.Cut(g.order[i], "#")
		number, _ := strconv.Atoi(n)
		items = append(items, map[string]any{"number": number, "state": "open", "secret_type": "switchboard_api_key", "secret": g.alerts[g.order[i]],
			"html_url":   "https://github.com/" + repo + "/security/secret-scanning/" + n,
			"repository": map[string]any{"full_name": repo, "html_url": "https://github.com/" + repo}})
	}
	if page*per < len(g.order) {
		w.Header().Set("Link", fmt.Sprintf(`<%s/organizations/9919/secret-scanning/alerts?state=open&hide_secret=false&per_page=%d&page=%d>; rel="next"`, g.url, per, page+1))
	}
	_ = json.NewEncoder(w).Encode(items)
}

// alertDelivery is GitHub's secret_scanning_alert delivery of repo's alert number, signed with
// secret, as delivery id.
func alertDelivery(t *testing.T, url string, secret []byte, action, repo string, number int, delivery string) *http.Request {
	t.Helper()
	body := fmt.Appendf(nil, `{"action":%q,"alert":{"number":%d,"secret_type":"switchboard_api_key"},"repository":{"full_name":%q,"html_url":"https://github.com/%s"},`+
		`"organization":{"login":"acme"},"sender":{"login":"octocat"}}`, action, number, repo, repo)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, url+leakreceiver.AlertsPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "secret_scanning_alert")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	return req
}

// from is an HTTP client whose connections come from the loopback address ip (127.0.0.2 and
// up: every 127/8 address is the machine's own), as a client at another address would.
func from(ip string) *http.Client {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// send does req with c and returns the status and the body.
func send(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}
