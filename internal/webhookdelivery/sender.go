package webhookdelivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/switchboard-dev/switchboard/internal/version"
)

// DefaultSchedule is the Standard Webhooks specification's example retry schedule: the delay
// before each attempt, the first immediate, the last 75 hours and a half after it, ten attempts.
var DefaultSchedule = []time.Duration{
	0,
	5 * time.Second,
	5 * time.Minute,
	30 * time.Minute,
	2 * time.Hour,
	5 * time.Hour,
	10 * time.Hour,
	14 * time.Hour,
	20 * time.Hour,
	24 * time.Hour,
}

// Defaults and bounds of a Sender.
const (
	// DefaultTimeout bounds one attempt, from dialling to the answer's last byte read: the
	// specification recommends 15 to 30 seconds.
	DefaultTimeout = 15 * time.Second
	// Jitter spreads each delay over ±Jitter of itself, so that endpoints that failed together
	// (a receiver's outage) are not retried together.
	Jitter = 0.1
	// maxAnswerBytes is how much of an answer is read (and thrown away, so that the connection
	// can be reused); a longer one is cut off.
	maxAnswerBytes = 64 << 10
	// maxAnswerHeaderBytes bounds an answer's headers.
	maxAnswerHeaderBytes = 16 << 10
)

// Outcome is what to do with a message after an attempt.
type Outcome int

// The outcomes of an attempt.
const (
	// Delivered: the endpoint answered 2xx; nothing more to do.
	Delivered Outcome = iota + 1
	// Retry: the attempt failed; try again at Result.RetryAt.
	Retry
	// Disable: the endpoint answered 410 Gone, it wants no more deliveries; stop sending it
	// any message until its subscription is changed.
	Disable
	// GiveUp: the schedule's last attempt failed; the message is not delivered.
	GiveUp
)

// String returns the outcome's name, for logs, metrics and statuses.
func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "Delivered"
	case Retry:
		return "Retry"
	case Disable:
		return "Disable"
	case GiveUp:
		return "GiveUp"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is what one attempt did and what is next.
type Result struct {
	// Outcome is what to do next.
	Outcome Outcome
	// RetryAt is when to make the next attempt (Outcome Retry).
	RetryAt time.Time
	// StatusCode is the endpoint's answer, 0 when there was none (refused, unreachable, timed out).
	StatusCode int
	// Err says why the attempt failed, nil when delivered. It names the endpoint by scheme and
	// host only (a URL's path may carry the receiver's token) and holds no secret; it wraps
	// ErrRefused when Policy refused the connection.
	Err error
}

// Endpoint is where a message goes and how it is signed.
type Endpoint struct {
	// URL is the endpoint, as Policy.ParseEndpoint returned it.
	URL *url.URL
	// Signer signs with the endpoint's current secrets.
	Signer *Signer
}

// Options configure a Sender.
type Options struct {
	// Policy says which endpoints may be called.
	Policy Policy
	// Timeout bounds one attempt (DefaultTimeout when 0).
	Timeout time.Duration
	// Schedule is the delay before each attempt (DefaultSchedule when nil); its length is the
	// number of attempts.
	Schedule []time.Duration
	// Now is the clock (time.Now when nil): webhook-timestamp and RetryAt are read from it.
	Now func() time.Time
	// Rand returns a number in [0, 1) for jitter (math/rand/v2's Float64 when nil).
	Rand func() float64
	// RootCAs are the certificate authorities endpoints' certificates are checked against (the
	// system's when nil).
	RootCAs *x509.CertPool
}

// Sender makes attempts to deliver messages. It holds one HTTP client whose connections go only
// where Policy allows; it is safe for concurrent use.
type Sender struct {
	client   *http.Client
	policy   Policy
	timeout  time.Duration
	schedule []time.Duration
	now      func() time.Time
	rand     func() float64
}

// NewSender returns a Sender configured by o, or why o cannot configure one.
func NewSender(o Options) (*Sender, error) {
	for _, n := range append(append([]netip.Prefix(nil), o.Policy.Denied...), o.Policy.Allowed...) {
		if !n.IsValid() {
			return nil, fmt.Errorf("network %q is not a CIDR", n)
		}
	}
	s := &Sender{policy: o.Policy, timeout: o.Timeout, schedule: o.Schedule, now: o.Now, rand: o.Rand}
	if s.timeout < 0 {
		return nil, fmt.Errorf("timeout %s: more than 0", s.timeout)
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.schedule == nil {
		s.schedule = DefaultSchedule
	}
	if len(s.schedule) == 0 {
		return nil, errors.New("a schedule of no attempts")
	}
	for i, d := range s.schedule {
		if d < 0 {
			return nil, fmt.Errorf("schedule: delay %d is %s, less than 0", i+1, d)
		}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	dialer := &net.Dialer{Timeout: s.timeout, Control: s.policy.control}
	s.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // never HTTPS_PROXY: the policy must see the endpoint's own address
			DialContext:            dialer.DialContext,
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.RootCAs},
			TLSHandshakeTimeout:    s.timeout,
			ResponseHeaderTimeout:  s.timeout,
			MaxResponseHeaderBytes: maxAnswerHeaderBytes,
			ForceAttemptHTTP2:      true,
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        90 * time.Second,
		},
		// A redirect is not followed: the specification counts a 3xx as a failure (the tenant
		// updates its URL), and its target would be a request nobody checked in advance.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		// The attempt's bound, from dialling to the answer's last byte read.
		Timeout: s.timeout,
	}
	return s, nil
}

// Attempts is the number of attempts a message gets.
func (s *Sender) Attempts() int { return len(s.schedule) }

// Send makes attempt number attempt (1 for the first) to deliver m to ep, and says what is
// next. Its error is for what makes the attempt impossible to make (a bad message id, an
// endpoint the policy refuses by its URL, an attempt number out of the schedule): nothing is
// sent, and trying again will not help.
func (s *Sender) Send(ctx context.Context, ep Endpoint, m Message, attempt int) (Result, error) {
	if attempt < 1 || attempt > len(s.schedule) {
		return Result{}, fmt.Errorf("attempt %d: the schedule has attempts 1 to %d", attempt, len(s.schedule))
	}
	if err := ValidateID(m.ID); err != nil {
		return Result{}, err
	}
	if ep.Signer == nil || ep.URL == nil {
		return Result{}, errors.New("endpoint without URL or signer")
	}
	if len(m.Body) > MaxBodyBytes {
		return Result{}, fmt.Errorf("message %s: %d bytes, more than %d", m.ID, len(m.Body), MaxBodyBytes)
	}
	u, err := s.policy.ParseEndpoint(ep.URL.String())
	if err != nil {
		return Result{}, err
	}
	target := u.Scheme + "://" + u.Host

	now := s.now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Body))
	if err != nil {
		return Result{}, fmt.Errorf("POST %s: %w", target, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "switchboard/"+version.Version)
	req.Header.Set(HeaderID, m.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, ep.Signer.Sign(m.ID, now, m.Body))

	resp, err := s.client.Do(req)
	if err != nil {
		return s.failed(attempt, 0, 0, fmt.Errorf("POST %s: %w", target, cause(err))), nil
	}
	// Read a bounded part of the answer, so that the connection can be reused, and no more.
	// An answer cut short (by the limit or the deadline) does not unsay its status.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return Result{Outcome: Delivered, StatusCode: code}, nil
	case code == http.StatusGone:
		return Result{Outcome: Disable, StatusCode: code, Err: fmt.Errorf("POST %s: 410 Gone: the endpoint wants no more deliveries", target)}, nil
	default:
		return s.failed(attempt, code, retryAfter(resp.Header.Get("Retry-After"), now), fmt.Errorf("POST %s: %s", target, resp.Status)), nil
	}
}

// failed returns the Result of a failed attempt: Retry after the schedule's next delay,
// jittered, or the delay the endpoint asked for if longer (up to the schedule's longest), or
// GiveUp after the last attempt.
func (s *Sender) failed(attempt, code int, asked time.Duration, err error) Result {
	if attempt >= len(s.schedule) {
		return Result{Outcome: GiveUp, StatusCode: code, Err: err}
	}
	delay := s.delay(attempt + 1)
	if asked > delay {
		delay = min(asked, slices.Max(s.schedule))
	}
	return Result{Outcome: Retry, RetryAt: s.now().Add(delay), StatusCode: code, Err: err}
}

// delay returns the jittered delay before attempt number attempt (2 or more).
func (s *Sender) delay(attempt int) time.Duration {
	d := s.schedule[attempt-1]
	return d + time.Duration(float64(d)*Jitter*(2*s.rand()-1))
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date) as a delay from now; 0 when
// there is none or it cannot be read.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(h, 10, 64); err == nil {
		if secs <= 0 || secs > int64(1<<31) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// cause strips the *url.Error that net/http wraps a failure in, whose message repeats the whole
// URL (and a token its path may carry).
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
