package webhookdelivery

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// start is the fixed time of the tests' clock.
var start = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// loopback allows the tests' own servers: the allowance a platform gives an in-cluster receiver.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// delivery is what a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a test endpoint that records what it gets and answers with handle (200 when nil).
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []delivery
}

// newReceiver starts a receiver listening on addr ("127.0.0.1:0" when ""), over TLS when tls;
// nil when this machine has no such address (::1 without IPv6).
func newReceiver(t *testing.T, addr string, tls bool, handle http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{header: req.Header.Clone(), body: body})
		r.mu.Unlock()
		if handle != nil {
			handle(w, req)
		}
	}))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("cannot listen on %s here: %v", addr, err)
			return nil
		}
		_ = srv.Listener.Close()
		srv.Listener = l
	}
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	r.Server = srv
	return r
}

// deliveries returns what r got so far.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// port returns the port r listens on.
func (r *receiver) port() string {
	_, p, _ := net.SplitHostPort(r.Listener.Addr().String())
	return p
}

// newTestSender returns a Sender on the tests' fixed clock, without jitter, that allows plain
// HTTP and what allowed says.
func newTestSender(t *testing.T, allowed []netip.Prefix, o Options) *Sender {
	t.Helper()
	o.Policy.AllowHTTP = true
	o.Policy.Allowed = allowed
	if o.Policy.Denied == nil {
		o.Policy.Denied = clusterPolicy.Denied
	}
	if o.Now == nil {
		o.Now = func() time.Time { return start }
	}
	if o.Rand == nil {
		o.Rand = func() float64 { return 0.5 }
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	s, err := NewSender(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testMessage returns a leak event's message.
func testMessage(t *testing.T) Message {
	t.Helper()
	last := start.Add(-time.Minute)
	m, err := NewMessage("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", Event{Type: KeyLeaked, Timestamp: start.Add(-time.Second), Data: KeyData{
		Namespace: "team-a", Name: "billing-api", KeyGeneration: 3, KeyHint: "sb_live_AbCd…wxyz",
		URL: "https://github.com/example/repo/blob/main/.env", LastUsedAt: &last,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// endpoint returns the Endpoint of raw signed with secret.
func endpoint(t *testing.T, raw string, secrets ...string) Endpoint {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets) == 0 {
		secrets = []string{testSecret(7, 32)}
	}
	s, err := NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return Endpoint{URL: u, Signer: s}
}

// TestSendDelivers sends over HTTPS to a receiver that verifies with the Standard Webhooks
// reference library, on the fixed clock and on the real one.
func TestSendDelivers(t *testing.T) {
	secret := testSecret(7, 32)
	r := newReceiver(t, "", true, nil)
	roots := x509.NewCertPool()
	roots.AddCert(r.Certificate())
	m := testMessage(t)

	s := newTestSender(t, loopback, Options{RootCAs: roots})
	s.policy.AllowHTTP = false
	ep := endpoint(t, r.URL+"/hooks/switchboard", secret)
	for attempt := 1; attempt <= 2; attempt++ {
		res, err := s.Send(context.Background(), ep, m, attempt)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != Delivered || res.StatusCode != http.StatusOK || res.Err != nil {
			t.Fatalf("attempt %d: %+v, want Delivered", attempt, res)
		}
	}
	got := r.deliveries()
	if len(got) != 2 {
		t.Fatalf("the receiver got %d deliveries, want 2", len(got))
	}
	for _, d := range got {
		if err := verifier(t, secret).VerifyIgnoringTimestamp(d.body, d.header); err != nil {
			t.Errorf("the reference library refuses the delivery: %v", err)
		}
		if d.header.Get(HeaderID) != m.ID || d.header.Get(HeaderTimestamp) != strconv.FormatInt(start.Unix(), 10) ||
			d.header.Get("Content-Type") != "application/json" || string(d.body) != string(m.Body) {
			t.Errorf("the receiver got %v %s", d.header, d.body)
		}
	}

	// On the real clock, the reference library's timestamp tolerance (5 minutes) passes too.
	live := newTestSender(t, loopback, Options{RootCAs: roots, Now: time.Now})
	if res, err := live.Send(context.Background(), ep, m, 1); err != nil || res.Outcome != Delivered {
		t.Fatalf("%+v, %v", res, err)
	}
	got = r.deliveries()
	if err := verifier(t, secret).Verify(got[2].body, got[2].header); err != nil {
		t.Errorf("the reference library refuses a delivery sent now: %v", err)
	}

	// Without the allowance, the same receiver is refused: it is on loopback.
	strict := newTestSender(t, nil, Options{RootCAs: roots})
	if _, err := strict.Send(context.Background(), ep, m, 1); !errors.Is(err, ErrRefused) {
		t.Errorf("without the allowance: %v, want ErrRefused", err)
	}
	// And a certificate nobody vouches for is an error.
	untrusted := newTestSender(t, loopback, Options{})
	if res, err := untrusted.Send(context.Background(), ep, m, 1); err != nil || res.Outcome != Retry {
		t.Errorf("to an untrusted certificate: %+v, %v, want Retry", res, err)
	}
	if n := len(r.deliveries()); n != 3 {
		t.Errorf("the receiver got %d deliveries, want 3", n)
	}
}

// TestSendOutcomes is the table of answers and what Send says to do next.
func TestSendOutcomes(t *testing.T) {
	last := len(DefaultSchedule)
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		attempt    int
		want       Outcome
		wantDelay  time.Duration // after start, when Retry
	}{
		{"200", 200, "", 1, Delivered, 0},
		{"204", 204, "", 1, Delivered, 0},
		{"299", 299, "", 4, Delivered, 0},
		{"410 disables", 410, "", 1, Disable, 0},
		{"410 on the last attempt disables", 410, "", last, Disable, 0},
		{"500", 500, "", 1, Retry, 5 * time.Second},
		{"404", 404, "", 2, Retry, 5 * time.Minute},
		{"302 is a failure", 302, "", 3, Retry, 30 * time.Minute},
		{"400", 400, "", 9, Retry, 24 * time.Hour},
		{"100 continue is no answer", 101, "", 1, Retry, 5 * time.Second},
		{"429 with Retry-After in seconds", 429, "120", 1, Retry, 120 * time.Second},
		{"503 with Retry-After as a date", 503, start.Add(time.Hour).Format(http.TimeFormat), 2, Retry, time.Hour},
		{"Retry-After shorter than the schedule", 503, "1", 3, Retry, 30 * time.Minute},
		{"Retry-After beyond the longest step", 429, "999999", 1, Retry, 24 * time.Hour},
		{"Retry-After unreadable", 429, "soon", 1, Retry, 5 * time.Second},
		{"500 on the last attempt gives up", 500, "", last, GiveUp, 0},
		{"200 on the last attempt", 200, "", last, Delivered, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t, "", false, func(w http.ResponseWriter, _ *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				if tc.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				if tc.status == 101 {
					w.Header().Set("Connection", "close")
				}
				w.WriteHeader(tc.status)
			})
			s := newTestSender(t, loopback, Options{})
			res, err := s.Send(context.Background(), endpoint(t, r.URL), testMessage(t), tc.attempt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.want {
				t.Fatalf("%+v, want %s", res, tc.want)
			}
			if tc.want == Retry && res.RetryAt != start.Add(tc.wantDelay) {
				t.Errorf("retry at %s after start, want %s", res.RetryAt.Sub(start), tc.wantDelay)
			}
			if tc.want != Retry && !res.RetryAt.IsZero() {
				t.Errorf("retry at %s, want none", res.RetryAt)
			}
			if (tc.want == Delivered) != (res.Err == nil) {
				t.Errorf("error %v with outcome %s", res.Err, res.Outcome)
			}
			if n := len(r.deliveries()); n != 1 {
				t.Errorf("the receiver got %d requests, want 1 (no redirect followed)", n)
			}
		})
	}
}

// TestRetrySchedule is the table of the delay after each failed attempt: the specification's
// schedule, jittered by ±10% by the injected random number, and GiveUp after the last.
func TestRetrySchedule(t *testing.T) {
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
		10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}
	for _, tc := range []struct {
		rand   float64
		factor float64
	}{{0.5, 1}, {0, 0.9}, {0.75, 1.05}, {0.999999, 1.0999998}} {
		s := newTestSender(t, nil, Options{Rand: func() float64 { return tc.rand }})
		for attempt := 1; attempt <= len(want)+1; attempt++ {
			res := s.failed(attempt, 500, 0, errors.New("500"))
			if attempt > len(want) {
				if res.Outcome != GiveUp {
					t.Errorf("rand %v: attempt %d: %+v, want GiveUp", tc.rand, attempt, res)
				}
				continue
			}
			wantAt := start.Add(time.Duration(float64(want[attempt-1]) * tc.factor))
			if d := res.RetryAt.Sub(wantAt); res.Outcome != Retry || d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("rand %v: attempt %d failed: %s, retry %s after start, want %s", tc.rand, attempt,
					res.Outcome, res.RetryAt.Sub(start), wantAt.Sub(start))
			}
		}
	}
	if got := newTestSender(t, nil, Options{}).Attempts(); got != 10 {
		t.Errorf("%d attempts, want the specification's 10", got)
	}
	short := newTestSender(t, nil, Options{Schedule: []time.Duration{0, time.Minute}})
	if res := short.failed(1, 0, 0, errors.New("x")); res.Outcome != Retry || res.RetryAt != start.Add(time.Minute) {
		t.Errorf("a schedule of two: %+v", res)
	}
	if res := short.failed(2, 0, 0, errors.New("x")); res.Outcome != GiveUp {
		t.Errorf("a schedule of two, second attempt: %+v", res)
	}
}

// TestSendRefuses is the table of targets a tenant must not reach: each is refused and gets
// nothing, directly, through a name and through a redirect, and each that a test can serve is
// reached once the platform allows it.
func TestSendRefuses(t *testing.T) {
	v4 := newReceiver(t, "127.0.0.1:0", false, nil)
	other := newReceiver(t, "127.0.0.2:0", false, nil)
	v6, v6Port := newReceiver(t, "[::1]:0", false, nil), "1"
	if v6 != nil {
		v6Port = v6.port()
	}
	clusterIP := netip.MustParsePrefix("10.96.0.1/32")

	for _, tc := range []struct {
		name    string
		target  string
		served  *receiver      // the server behind target, when there is one
		allowed []netip.Prefix // what makes target reachable
	}{
		{"::1", "http://[::1]:" + v6Port + "/in", v6, loopback},
		{"127.0.0.2", "http://127.0.0.2:" + other.port() + "/in", other, loopback},
		{"169.254.169.254", "http://169.254.169.254/latest/meta-data/", nil, nil},
		{"::ffff:127.0.0.1", "http://[::ffff:127.0.0.1]:" + v4.port() + "/in", v4, loopback},
		{"a ClusterIP", "http://10.96.0.1/in", nil, []netip.Prefix{clusterIP}},
		{"a name that resolves to loopback", "http://localhost:" + v4.port() + "/in", v4, loopback},
		// Translation addresses, judged as the IPv4 address they carry, on the URL and at dial
		// time; what the platform allows of that IPv4 address makes them reachable.
		{"NAT64 of a ClusterIP", "http://[64:ff9b::a60:1]/in", nil, []netip.Prefix{clusterIP}},
		{"local-use NAT64 of a ClusterIP", "http://[64:ff9b:1::a60:1]/in", nil, []netip.Prefix{clusterIP}},
		{"6to4 of loopback", "http://[2002:7f00:1::1]/in", nil, nil},
		{"IPv4-compatible of a ClusterIP", "http://[::a60:1]/in", nil, []netip.Prefix{clusterIP}},
		// Metadata endpoints: refused whatever the platform allows.
		{"fd00:ec2::254", "http://[fd00:ec2::254]/latest/meta-data/", nil, nil},
		{"100.100.100.200", "http://100.100.100.200/latest/meta-data/", nil, nil},
		{"NAT64 of 169.254.169.254", "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "::1" && v6 == nil {
				t.Skip("no IPv6 loopback on this machine")
			}
			before := 0
			if tc.served != nil {
				before = len(tc.served.deliveries())
			}
			s := newTestSender(t, nil, Options{Timeout: time.Second})
			ep := endpoint(t, tc.target)

			// Send refuses it: by the URL when it holds an address, else when connecting.
			res, err := s.Send(context.Background(), ep, testMessage(t), 1)
			if err == nil && (res.Outcome != Retry || !errors.Is(res.Err, ErrRefused)) {
				t.Errorf("Send: %+v, want ErrRefused", res)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("Send: %v, want ErrRefused", err)
			}
			// The client refuses it when connecting, whatever the URL checks did.
			req, _ := http.NewRequest(http.MethodPost, tc.target, strings.NewReader("{}"))
			if resp, err := s.client.Do(req); !errors.Is(err, ErrRefused) {
				if err == nil {
					_ = resp.Body.Close()
				}
				t.Errorf("the client connected: %v, want ErrRefused", err)
			}
			// A redirect to it is not followed, from an endpoint that is allowed.
			redirector := newReceiver(t, "127.0.0.1:0", false, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tc.target, http.StatusTemporaryRedirect)
			})
			s.policy.Allowed = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			s.client = mustSender(t, s.policy).client
			res, err = s.Send(context.Background(), endpoint(t, redirector.URL), testMessage(t), 1)
			if err != nil || res.Outcome != Retry || res.StatusCode != http.StatusTemporaryRedirect {
				t.Errorf("to a redirect: %+v, %v, want Retry on 307", res, err)
			}
			if tc.served != nil {
				if n := len(tc.served.deliveries()) - before; n != 0 {
					t.Fatalf("the target got %d requests", n)
				}
			}

			// Allowed, it is reached (a ClusterIP has no server here: the connection is tried).
			if tc.allowed == nil {
				return
			}
			allowed := newTestSender(t, tc.allowed, Options{Timeout: 300 * time.Millisecond})
			res, err = allowed.Send(context.Background(), ep, testMessage(t), 1)
			if err != nil || errors.Is(res.Err, ErrRefused) {
				t.Fatalf("allowed: %+v, %v", res, err)
			}
			if tc.served != nil && (res.Outcome != Delivered || len(tc.served.deliveries())-before != 1) {
				t.Errorf("allowed: %+v, want Delivered once", res)
			}
		})
	}
}

// mustSender returns a Sender with policy p on the tests' clock.
func mustSender(t *testing.T, p Policy) *Sender {
	t.Helper()
	s, err := NewSender(Options{Policy: p, Timeout: time.Second, Now: func() time.Time { return start }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSendTimesOut checks that an endpoint that never answers, or never finishes its answer,
// holds an attempt no longer than the timeout (injected, short; the test waits far longer).
func TestSendTimesOut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	silent := newReceiver(t, "", false, func(http.ResponseWriter, *http.Request) { <-release })
	trickle := newReceiver(t, "", false, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-release:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	s := newTestSender(t, loopback, Options{Timeout: 200 * time.Millisecond})
	for _, tc := range []struct {
		name string
		r    *receiver
		want Outcome
	}{
		{"no answer", silent, Retry},
		{"an answer that never ends", trickle, Delivered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan Result, 1)
			go func() {
				res, err := s.Send(context.Background(), endpoint(t, tc.r.URL), testMessage(t), 1)
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			select {
			case res := <-done:
				if res.Outcome != tc.want {
					t.Errorf("%+v, want %s", res, tc.want)
				}
				var ne net.Error
				if tc.want == Retry && (res.StatusCode != 0 || !errors.As(res.Err, &ne) || !ne.Timeout()) {
					t.Errorf("%+v, want a timeout", res)
				}
			case <-time.After(time.Minute):
				t.Fatal("Send still waits a minute later; the timeout is 200ms")
			}
		})
	}
}

// TestSendIgnoresProxyEnvironment checks that HTTP_PROXY does not carry deliveries: through a
// proxy, the policy would see the proxy's address, not the endpoint's.
func TestSendIgnoresProxyEnvironment(t *testing.T) {
	proxy := newReceiver(t, "", false, nil)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	s := newTestSender(t, loopback, Options{})
	res, err := s.Send(context.Background(), endpoint(t, "http://hooks.example.invalid/in"), testMessage(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Retry || len(proxy.deliveries()) != 0 {
		t.Errorf("%+v; the proxy got %d requests, want none", res, len(proxy.deliveries()))
	}
}

// TestSendErrorsNameNoPathOrSecret checks that a failed attempt's error names the endpoint by
// scheme and host only: its path and query may carry the receiver's token.
func TestSendErrorsNameNoPathOrSecret(t *testing.T) {
	secret := testSecret(5, 32)
	failing := newReceiver(t, "", false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) })
	for _, tc := range []struct {
		name    string
		raw     string
		allowed []netip.Prefix
	}{
		{"an answer", failing.URL + "/t0ken-in-path?token=t0ken-in-query", loopback},
		{"a refusal when connecting", "http://localhost:" + failing.port() + "/t0ken-in-path?token=t0ken-in-query", nil},
		{"no such host", "http://hooks.example.invalid/t0ken-in-path?token=t0ken-in-query", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSender(t, tc.allowed, Options{})
			res, err := s.Send(context.Background(), endpoint(t, tc.raw, secret), testMessage(t), 1)
			if err != nil || res.Err == nil {
				t.Fatalf("%+v, %v", res, err)
			}
			if msg := res.Err.Error(); strings.Contains(msg, "t0ken") || strings.Contains(msg, strings.TrimPrefix(secret, SecretPrefix)) {
				t.Errorf("error %q names the path, query or secret", msg)
			}
		})
	}
}

// TestSendRefusesBadInput checks the errors of attempts that cannot be made: nothing is sent.
func TestSendRefusesBadInput(t *testing.T) {
	r := newReceiver(t, "", false, nil)
	m := testMessage(t)
	ok := endpoint(t, r.URL)
	s := newTestSender(t, loopback, Options{})
	strict := newTestSender(t, loopback, Options{})
	strict.policy.AllowHTTP = false
	for _, tc := range []struct {
		name    string
		s       *Sender
		ep      Endpoint
		m       Message
		attempt int
		want    string
	}{
		{"attempt 0", s, ok, m, 0, "attempt 0: the schedule has attempts 1 to 10"},
		{"attempt 11", s, ok, m, 11, "attempt 11"},
		{"an id with a dot", s, ok, Message{ID: "msg.1", Body: m.Body}, 1, "message id"},
		{"a body too large", s, ok, Message{ID: m.ID, Body: make([]byte, MaxBodyBytes+1)}, 1, "more than 20480"},
		{"no signer", s, Endpoint{URL: ok.URL}, m, 1, "without URL or signer"},
		{"plain HTTP", strict, ok, m, 1, "only https://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.s.Send(context.Background(), tc.ep, tc.m, tc.attempt); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if n := len(r.deliveries()); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
}

// TestNewSenderRefusesBadOptions is the table of options NewSender refuses.
func TestNewSenderRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"negative timeout", Options{Timeout: -time.Second}, "timeout -1s"},
		{"no attempts", Options{Schedule: []time.Duration{}}, "no attempts"},
		{"a negative delay", Options{Schedule: []time.Duration{0, -time.Second}}, "delay 2 is -1s"},
		{"a denied network that is none", Options{Policy: Policy{Denied: []netip.Prefix{{}}}}, "not a CIDR"},
		{"an allowed network that is none", Options{Policy: Policy{Allowed: []netip.Prefix{{}}}}, "not a CIDR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSender(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
