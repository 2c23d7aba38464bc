package secretscanning

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// DefaultMaxWebhookBody bounds a secret_scanning_alert delivery's body. GitHub's are some 10 to
// 30 KiB: the alert, and around it the full repository object (most of it: some 90 URLs and
// settings), the organization, the sender and, for an app, the installation; 256 KiB is ten
// times that. GitHub itself caps a payload at 25 MB, which no delivery of this event nears.
const DefaultMaxWebhookBody = 256 << 10

// AlertWebhookOptions configure an AlertWebhook.
type AlertWebhookOptions struct {
	// Secret is the webhook's secret, as set in the organization's webhook (required).
	Secret []byte
	// MaxBody bounds a delivery's body in bytes (default DefaultMaxWebhookBody).
	MaxBody int64
}

// AlertWebhook reads an organization's secret_scanning_alert webhook deliveries.
type AlertWebhook struct {
	opts AlertWebhookOptions
}

// NewAlertWebhook is a reader of deliveries signed with o.Secret.
func NewAlertWebhook(o AlertWebhookOptions) (*AlertWebhook, error) {
	if len(o.Secret) == 0 {
		return nil, errors.New("secret scanning webhook: no secret (GitHub signs deliveries only when the webhook has one)")
	}
	if o.MaxBody < 0 {
		return nil, errors.New("secret scanning webhook: the body bound may not be negative")
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxWebhookBody
	}
	return &AlertWebhook{opts: o}, nil
}

// AlertEvent is a verified delivery: either an alert to fetch (Act) or one to answer 2xx and
// leave (Ignored says why).
type AlertEvent struct {
	// Delivery is X-GitHub-Delivery, the delivery's id (a redelivery keeps it).
	Delivery string
	// Event is X-GitHub-Event.
	Event string
	// Action is the payload's action.
	Action string
	// Alert names the alert, when the event is secret_scanning_alert.
	Alert AlertRef
	// Ignored says why the delivery asks for nothing; "" when it reports a leak.
	Ignored string
}

// Act says whether the delivery reports a leak, to be fetched with AlertClient.Fetch.
func (e AlertEvent) Act() bool { return e.Ignored == "" }

// AlertRef names a secret scanning alert.
type AlertRef struct {
	// Repository is the repository's full name, "owner/name".
	Repository string
	// RepositoryURL is the repository's web page (GitHub's or a GitHub Enterprise Server's),
	// from which a location's link is built.
	RepositoryURL string
	// Number is the alert's number in its repository.
	Number int64
}

// ID is the alert's identity, "owner/name#number": deliveries of the same alert (a
// redelivery, created then reopened) have the same.
func (a AlertRef) ID() string { return a.Repository + "#" + strconv.FormatInt(a.Number, 10) }

// actions are the secret_scanning_alert actions that report a leak: the alert is new, is open
// again, or its secret was also found in public. The others (resolved, validated, assigned,
// unassigned) report nothing new about the key.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#secret_scanning_alert
var actions = map[string]bool{"created": true, "reopened": true, "publicly_leaked": true}

// repositoryName is what a repository's full name may look like.
var repositoryName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$`)

// validRepository says whether name is a repository's full name, "owner/name", safe to put in
// an API path as it is: nothing to escape, no "." or ".." segment.
func validRepository(name string) bool {
	owner, repo, _ := strings.Cut(name, "/")
	return repositoryName.MatchString(name) && owner != "." && owner != ".." && repo != "." && repo != ".."
}

// Read verifies r's X-Hub-Signature-256 over its raw body and returns the delivery: Verify,
// then Parse.
func (w *AlertWebhook) Read(r *http.Request) (AlertEvent, error) {
	body, err := w.Verify(r)
	if err != nil {
		return AlertEvent{}, err
	}
	return w.Parse(r.Header, body)
}

// Verify checks r's signature headers before it reads a byte of the body (CheckAlertHeaders),
// then reads the body and verifies X-Hub-Signature-256 over it. It refuses a missing, garbled
// or wrong signature (ErrUnauthenticated) and a body over the bound (ErrTooLarge); what it
// returns is a body GitHub signed.
func (w *AlertWebhook) Verify(r *http.Request) ([]byte, error) {
	sum, err := parseHubSignature(r.Header.Get("X-Hub-Signature-256"))
	if err != nil {
		return nil, err
	}
	body, err := readBody(r, w.opts.MaxBody)
	if err != nil {
		return nil, err
	}
	if err := verifyHMAC(w.opts.Secret, sum, body); err != nil {
		return nil, err
	}
	return body, nil
}

// Parse reads a verified delivery (Verify's body, with its request's headers). It refuses a
// body that is not a secret_scanning_alert payload in JSON (ErrMalformed); other events (ping
// included) and actions come back Ignored.
//
// The signature covers the body, not the headers: a signed body sent again under another
// X-GitHub-Event names at worst another alert of the same repository, whose token is then
// fetched from GitHub itself; nor is X-GitHub-Delivery signed, so nothing is decided by it.
func (w *AlertWebhook) Parse(h http.Header, body []byte) (AlertEvent, error) {
	ev := AlertEvent{Delivery: h.Get("X-GitHub-Delivery"), Event: h.Get("X-GitHub-Event")}
	if ct, _, _ := mime.ParseMediaType(h.Get("Content-Type")); ct != "application/json" {
		return ev, fmt.Errorf("%w: content type %q: set the webhook's content type to application/json", ErrMalformed, ct)
	}
	switch ev.Event {
	case "secret_scanning_alert":
	case "ping":
		ev.Ignored = "ping: the webhook reaches switchboard"
		return ev, nil
	default:
		ev.Ignored = fmt.Sprintf("event %q is not secret_scanning_alert", ev.Event)
		return ev, nil
	}
	return parseAlertEvent(ev, body)
}

// alertPayload is what switchboard reads of a secret_scanning_alert payload.
type alertPayload struct {
	Action string `json:"action"`
	Alert  *struct {
		Number int64 `json:"number"`
	} `json:"alert"`
	Repository *struct {
		FullName string `json:"full_name"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
}

// parseAlertEvent fills ev from a secret_scanning_alert payload.
func parseAlertEvent(ev AlertEvent, body []byte) (AlertEvent, error) {
	var p alertPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return ev, fmt.Errorf("%w: not a secret_scanning_alert payload: %s", ErrMalformed, jsonError(err))
	}
	ev.Action = p.Action
	if !actions[p.Action] {
		ev.Ignored = fmt.Sprintf("action %q reports no leak", p.Action)
		return ev, nil
	}
	if p.Alert == nil || p.Alert.Number <= 0 {
		return ev, fmt.Errorf("%w: secret_scanning_alert without alert.number", ErrMalformed)
	}
	if p.Repository == nil || !validRepository(p.Repository.FullName) {
		return ev, fmt.Errorf("%w: secret_scanning_alert without a repository.full_name of the form owner/name", ErrMalformed)
	}
	ev.Alert = AlertRef{Repository: p.Repository.FullName, RepositoryURL: p.Repository.HTMLURL, Number: p.Alert.Number}
	return ev, nil
}

// verifyHub checks an X-Hub-Signature-256 header, "sha256=" and the hex HMAC-SHA256 of body
// under secret, in constant time.
// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
func verifyHub(secret []byte, header string, body []byte) error {
	sum, err := parseHubSignature(header)
	if err != nil {
		return err
	}
	return verifyHMAC(secret, sum, body)
}

// verifyHMAC checks that sum is the HMAC-SHA256 of body under secret, in constant time.
func verifyHMAC(secret, sum, body []byte) error {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(sum, mac.Sum(nil)) {
		return fmt.Errorf("%w: X-Hub-Signature-256 does not match the body under the webhook's secret", ErrUnauthenticated)
	}
	return nil
}
