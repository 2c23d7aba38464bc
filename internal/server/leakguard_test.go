//go:build !unit

package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// unsigned is a POST to path without any signature header, as a stranger sends.
func unsigned(t *testing.T, url, path string, forwardedFor string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, url+path, strings.NewReader(`[{"token":"x"}]`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", forwardedFor)
	}
	return req
}

// TestLeakReceiverHearsGitHubFirst: requests without a valid signature spend their own
// address's budget only (401, then 429 before the body is read), whatever their number; the
// shared limit is taken only by verified requests that need a call, so GitHub's deliveries
// from another address are answered 200 through the flood, and a replay takes nothing of it.
// Behind a trusted proxy the address is the one it forwards; a stranger's X-Forwarded-For is
// not believed.
func TestLeakReceiverHearsGitHubFirst(t *testing.T) {
	secret, apiToken := []byte("the organization's webhook secret"), "github_pat_test"
	api := newGitHubAPI(t, apiToken)
	for n := 1; n <= 3; n++ {
		never, err := apikey.Generate(apikey.DefaultPrefix)
		if err != nil {
			t.Fatal(err)
		}
		api.add("acme/app", n, never)
	}
	lr := leakSection("http://127.0.0.1:1/keys")
	lr.Rate, lr.Burst = ptr.To(0.0001), ptr.To[int32](2)
	lr.UnverifiedLimit = configv1alpha1.LeakReportsUnverifiedLimit{Rate: ptr.To(0.0001), Burst: ptr.To[int32](3)}
	lr.OrganizationAlerts.APIBaseURL = api.url
	url := startLeakServer(t, nil, &sc{TrustedProxies: []string{"127.0.0.9/32"}, LeakReports: lr}, Deps{LeakReceiver: alertsWithoutCatchUp(secret, apiToken)})

	// A flood from two addresses, on both routes: three 401s each, then 429. Each refusal closes
	// its connection, which lingers a moment: past the door's share of connections per address,
	// the next are closed unanswered, which is a refusal too.
	for _, attacker := range []string{"127.0.0.3", "127.0.0.4"} {
		c := from(attacker)
		answered := 0
		for i := range 40 {
			path := []string{leakreceiver.AlertsPath, leakreceiver.PartnerPath}[i%2]
			resp, err := c.Do(unsigned(t, url, path, ""))
			if err != nil {
				continue
			}
			_ = resp.Body.Close()
			if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[answered < 3]; resp.StatusCode != want {
				t.Fatalf("%s's unsigned request %d (answer %d): %d, want %d", attacker, i+1, answered+1, resp.StatusCode, want)
			}
			answered++
		}
		if answered < 4 {
			t.Fatalf("%s's requests were answered %d times of 40", attacker, answered)
		}
	}
	// A forged signature from a third address: its own budget again.
	forged := alertDelivery(t, url, []byte("a guess"), "created", "acme/app", 1, "d-x")
	if status, _ := send(t, from("127.0.0.5"), forged); status != http.StatusUnauthorized {
		t.Fatalf("a forged signature: %d, want 401", status)
	}
	// A blocked address that claims another in X-Forwarded-For is not believed: it is no proxy.
	if status := sendAgain(t, from("127.0.0.3"), func() *http.Request { return unsigned(t, url, leakreceiver.AlertsPath, "203.0.113.1") }); status != http.StatusTooManyRequests {
		t.Fatalf("a blocked address claiming another: %d, want 429", status)
	}
	// Behind the trusted proxy, each forwarded client has its own budget.
	proxy := from("127.0.0.9")
	for i := range 4 {
		status, _ := send(t, proxy, unsigned(t, url, leakreceiver.AlertsPath, "203.0.113.1"))
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 3]; status != want {
			t.Fatalf("the proxy's client 203.0.113.1, request %d: %d, want %d", i+1, status, want)
		}
	}
	if status, _ := send(t, proxy, unsigned(t, url, leakreceiver.AlertsPath, "203.0.113.2")); status != http.StatusUnauthorized {
		t.Fatalf("the proxy's other client: %d, want 401 (its own budget)", status)
	}
	if api.total() != 0 {
		t.Fatalf("unverified requests cost %d requests to GitHub's API", api.total())
	}

	// GitHub, at another address, through all that: the shared limit (2) is whole.
	github := from("127.0.0.2")
	for n := 1; n <= 2; n++ {
		status, body := send(t, github, alertDelivery(t, url, secret, "created", "acme/app", n, fmt.Sprintf("d-%d", n)))
		if status != http.StatusOK || !strings.Contains(body, `"result":"false_positive"`) {
			t.Fatalf("GitHub's delivery of alert %d after the flood: %d %s, want 200", n, status, body)
		}
	}
	// The shared limit bounds the calls of new verified work...
	if status, _ := send(t, github, alertDelivery(t, url, secret, "created", "acme/app", 3, "d-3")); status != http.StatusTooManyRequests {
		t.Fatalf("a third new alert past the shared burst of 2: %d, want 429", status)
	}
	// ...and a replay, answered from memory, takes nothing of it.
	for range 10 {
		if status, _ := send(t, github, alertDelivery(t, url, secret, "created", "acme/app", 1, "d-1")); status != http.StatusOK {
			t.Fatalf("a replay of a handled alert: %d, want 200", status)
		}
	}
	if n := api.total(); n != 4 {
		t.Errorf("GitHub's API was asked %d times, want 4 (two alerts, two requests each)", n)
	}
}

// sendAgain sends the request mk makes until it is answered (an address's refused connections
// linger a moment, and past the door's share its next ones are closed unanswered), and returns
// the status.
func sendAgain(t *testing.T, c *http.Client, mk func() *http.Request) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Do(mk())
		if err == nil {
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer in 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLeakReceiverRefusesUnsignedBeforeTheBody: a request whose signature headers GitHub
// could not have sent is answered 401 as soon as its headers are in, while its announced body
// never comes, and its connection is closed.
func TestLeakReceiverRefusesUnsignedBeforeTheBody(t *testing.T) {
	url := startLeakServer(t, nil, &sc{LeakReports: leakSection("http://127.0.0.1:1/keys")}, Deps{LeakReceiver: alertsWithoutCatchUp([]byte("s"), "t")})
	addr := strings.TrimPrefix(url, "http://")
	for _, head := range []string{
		"POST " + leakreceiver.AlertsPath + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
		"POST " + leakreceiver.AlertsPath + " HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=abc\r\nContent-Length: 100000\r\n\r\n",
		"POST " + leakreceiver.PartnerPath + " HTTP/1.1\r\nHost: x\r\nGithub-Public-Key-Identifier: k1\r\nGithub-Public-Key-Signature: bm90IGFzbjE=\r\nContent-Length: 100000\r\n\r\n",
	} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer while the body is held: %v (%q)", err, head)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Errorf("%q: %d (close %v), want 401 and the connection closed", strings.SplitN(head, "\r\n", 3)[2], resp.StatusCode, resp.Close)
		}
		_ = c.Close()
	}
}

// logLines is a logger that keeps what it logs, for a test to read.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestLeakReceiverAnswersServerErrorsWhenGitHubCannotBeRead: an answer of GitHub's REST API
// that cannot be read (not JSON, an alert without its secret, too large) is 502, one that is an
// error 503: GitHub's log of deliveries shows a server error, never a bad request; the server
// logs why, without the token; nothing is recorded, nor remembered (the next delivery asks
// again).
func TestLeakReceiverAnswersServerErrorsWhenGitHubCannotBeRead(t *testing.T) {
	ns := env.Namespace(t, "leak-unreadable")
	leaked := newKey(t, ns, "leaked", switchboardv1alpha1.APIKeySpec{})
	secret, apiToken := []byte("the organization's webhook secret"), "github_pat_not_in_logs"
	api := newGitHubAPI(t, apiToken)
	api.add("acme/app", 1, leaked.Key)
	logs := &logLines{}
	log := logs.logger()
	lr := leakSection("")
	lr.OrganizationAlerts.APIBaseURL = api.url
	url := startLeakServer(t, nil, &sc{LeakReports: lr}, Deps{Logger: log, LeakReceiver: alertsWithoutCatchUp(secret, apiToken)})
	github := from("127.0.0.2")
	tests := []struct {
		name   string
		status int
		answer string
		want   int
		why    string
	}{
		{"not JSON", http.StatusOK, "<html>rate limited</html>", http.StatusBadGateway, "not GitHub's format"},
		{"JSON of another shape", http.StatusOK, `[{"number":1}]`, http.StatusBadGateway, "not GitHub's format"},
		{"an alert without its secret", http.StatusOK, `{"number":1,"state":"open"}`, http.StatusBadGateway, "has no secret"},
		{"a server error", http.StatusInternalServerError, `{"message":"Server Error"}`, http.StatusServiceUnavailable, "500 Internal Server Error"},
		{"no permission", http.StatusForbidden, `{"message":"Resource not accessible"}`, http.StatusServiceUnavailable, "403 Forbidden"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api.set(tt.status, tt.answer)
			status, body := send(t, github, alertDelivery(t, url, secret, "created", "acme/app", 1, fmt.Sprintf("d-%d", i)))
			if status != tt.want {
				t.Fatalf("%d %s, want %d", status, body, tt.want)
			}
			if got := logs.String(); !strings.Contains(got, tt.why) || strings.Contains(got, apiToken) || strings.Contains(got, leaked.Key) {
				t.Errorf("the logs do not say %q, or hold a secret:\n%s", tt.why, got)
			}
		})
	}
	if leakReport(t, leaked.Key) != nil {
		t.Fatal("a leak was recorded from an answer that could not be read")
	}
	api.set(0, "")
	if status, body := send(t, github, alertDelivery(t, url, secret, "created", "acme/app", 1, "d-again")); status != http.StatusOK || !strings.Contains(body, `"recorded"`) {
		t.Fatalf("the delivery once GitHub answers: %d %s, want 200 recorded", status, body)
	}
}

// TestLeakReceiverWaitsForTheIndex: until the index has synced, a verified report is answered
// 503 (GitHub sends it again; the catch-up lists an organization's alerts) and costs no call:
// a key is never judged against a partial index, nor its leak remembered as a false positive.
func TestLeakReceiverWaitsForTheIndex(t *testing.T) {
	secret, apiToken := []byte("the organization's webhook secret"), "github_pat_test"
	api := newGitHubAPI(t, apiToken)
	api.add("acme/app", 1, "sb_live_whatever")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// No right to read the hash Secrets: the index never syncs.
	lr := leakSection("")
	lr.OrganizationAlerts.APIBaseURL = api.url
	startServer(t, serviceAccountConfig(t, false, withLeakReports), &sc{LeakReports: lr},
		Deps{LeakReportsListener: l, LeakReceiver: alertsWithoutCatchUp(secret, apiToken)}, false)
	url := "http://" + l.Addr().String()
	for i := range 3 {
		status, body := send(t, from("127.0.0.2"), alertDelivery(t, url, secret, "created", "acme/app", 1, fmt.Sprint("d-", i)))
		if status != http.StatusServiceUnavailable {
			t.Fatalf("a signed delivery before the index synced: %d %s, want 503", status, body)
		}
	}
	if n := api.total(); n != 0 {
		t.Errorf("deliveries before the index synced cost %d requests to GitHub's API, want 0", n)
	}
}
