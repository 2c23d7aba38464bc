package secretscanning

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// DefaultMaxWebhookBody bounds a secret_scanning_alert delivery's body: GitHub's are a few
// KiB (the repository and organization objects), and it caps any payload at 25 MB.
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

// Read verifies r's X-Hub-Signature-256 over its raw body and returns the delivery. It refuses
// a body over the bound (ErrTooLarge), a missing or wrong signature (ErrUnauthenticated), and
// a signed body that is not a secret_scanning_alert payload in JSON (ErrMalformed). Other
// events (ping included) and actions come back Ignored.
//
// The signature covers the body, not the headers: a signed body sent again under another
// X-GitHub-Event names at worst another alert of the same repository, whose token is then
// fetched from GitHub itself.
func (w *AlertWebhook) Read(r *http.Request) (AlertEvent, error) {
	body, err := readBody(r, w.opts.MaxBody)
	if err != nil {
		return AlertEvent{}, err
	}
	if err := verifyHub(w.opts.Secret, r.Header.Get("X-Hub-Signature-256"), body); err != nil {
		return AlertEvent{}, err
	}
	ev := AlertEvent{Delivery: r.Header.Get("X-GitHub-Delivery"), Event: r.Header.Get("X-GitHub-Event")}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
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
	if header == "" {
		return fmt.Errorf("%w: no X-Hub-Signature-256 header", ErrUnauthenticated)
	}
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return fmt.Errorf("%w: X-Hub-Signature-256 does not begin with sha256=", ErrUnauthenticated)
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: X-Hub-Signature-256 is not a hex SHA-256", ErrUnauthenticated)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: X-Hub-Signature-256 does not match the body under the webhook's secret", ErrUnauthenticated)
	}
	return nil
}
