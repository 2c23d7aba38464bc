package webhookdelivery

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"
)

// EventType is the type of a key event, "apikey.<what happened>": the specification's
// full-stop delimited type, which names the schema of the payload's data.
type EventType string

// The key events a tenant can subscribe to.
const (
	// KeyCreated: an APIKey's first key was issued.
	KeyCreated EventType = "apikey.created"
	// KeyRevealed: a key's plaintext was claimed (by a person, or delivered to a Secret).
	KeyRevealed EventType = "apikey.revealed"
	// KeyRotated: a new key replaced the previous one on request (manual, or after a leak).
	KeyRotated EventType = "apikey.rotated"
	// KeyRenewed: a new key replaced the previous one because the lifecycle said it was due.
	KeyRenewed EventType = "apikey.renewed"
	// KeyExpiring: a key ends soon and nothing will renew it.
	KeyExpiring EventType = "apikey.expiring"
	// KeyUnused: a key has not been used for the configured time.
	KeyUnused EventType = "apikey.unused"
	// KeyRevoked: a key was revoked before its end.
	KeyRevoked EventType = "apikey.revoked"
	// KeyExpired: a key reached its end.
	KeyExpired EventType = "apikey.expired"
	// KeyLeaked: a verified report found a key where it should not be (data.url).
	KeyLeaked EventType = "apikey.leaked"
	// KeyCreditsLow: the key used 80 %, then 90 %, of its period's credits (data.credits,
	// thresholdPercent says which); once each per period.
	KeyCreditsLow EventType = "apikey.credits_low"
	// KeyCreditsExhausted: the key has no credits left in its period; once per period.
	KeyCreditsExhausted EventType = "apikey.credits_exhausted"
	// KeyCreditsRefilled: a new period began for a key whose previous one reached 80 %;
	// data.credits is the new period's balance; once per period.
	KeyCreditsRefilled EventType = "apikey.credits_refilled"
	// KeyMisused: a bound key was presented by workloads its binding does not name (data.misuse:
	// how many times since the previous apikey.misused, by whom); at most once an interval.
	KeyMisused EventType = "apikey.misused"
)

// EventTypes lists every EventType, in the order of a key's life.
var EventTypes = []EventType{
	KeyCreated, KeyRevealed, KeyRotated, KeyRenewed, KeyExpiring, KeyUnused, KeyRevoked, KeyExpired, KeyLeaked,
	KeyCreditsLow, KeyCreditsExhausted, KeyCreditsRefilled, KeyMisused,
}

// creditTypes are the events that carry data.credits.
var creditTypes = []EventType{KeyCreditsLow, KeyCreditsExhausted, KeyCreditsRefilled}

// CreditThresholds are the percentages of a period's credits at which apikey.credits_low is
// sent, in order.
var CreditThresholds = []int{80, 90}

// Event is the payload of a delivery, in the shape the specification recommends. A
// receiver reads data by type; each type's schema is Schema(type).
type Event struct {
	// Type is what happened.
	Type EventType `json:"type"`
	// Timestamp is when it happened (not when it is delivered: that is webhook-timestamp).
	Timestamp time.Time `json:"timestamp"`
	// Data is the key it happened to and the details.
	Data KeyData `json:"data"`
}

// KeyData is what an event says about the key: enough for the receiver to find it and to know
// which key of the APIKey is meant, never the key itself.
type KeyData struct {
	// Namespace and Name are the APIKey's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// KeyGeneration is the APIKey's status.keyGeneration of the key meant: 1 for the first key,
	// +1 per rotation or renewal (for rotated and renewed: the new key's).
	KeyGeneration int64 `json:"keyGeneration"`
	// KeyHint is that key's status.keyHint, e.g. "sb_live_AbCd…wxyz": recognisable, not usable.
	KeyHint string `json:"keyHint"`
	// PreviousKeyHint is the replaced key's hint (rotated and renewed).
	PreviousKeyHint string `json:"previousKeyHint,omitempty"`
	// Reason says why, in words: who rotated or revoked, what the leak report was.
	Reason string `json:"reason,omitempty"`
	// URL is where a leaked key was found (leaked only).
	URL string `json:"url,omitempty"`
	// LastUsedAt is when the key was last used, if ever.
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	// ExpiresAt is when the key ends (expiring and expired).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Credits is the key's credit balance (the credit events only).
	Credits *CreditsData `json:"credits,omitempty"`
	// Misuse is who presented a bound key without being bound, and how often (misused only).
	Misuse *MisuseData `json:"misuse,omitempty"`
}

// MisuseData is what an apikey.misused event reports of a bound key's misuses, as the API
// server counted them (status.binding): never the key, never what the binding names.
type MisuseData struct {
	// Mode is the binding's mode: ReportOnly (the requests were admitted) or Enforce (refused
	// with 403 API_KEY_WRONG_WORKLOAD).
	Mode string `json:"mode"`
	// Misuses counts the requests that proved no bound workload since the previous
	// apikey.misused of the key (all of them for the first), at least 1.
	Misuses int64 `json:"misuses"`
	// LastMisuseAt is when the last of them was seen.
	LastMisuseAt time.Time `json:"lastMisuseAt"`
	// PreviousReportAt is when the previous apikey.misused of the key was sent (absent for the
	// first).
	PreviousReportAt *time.Time `json:"previousReportAt,omitempty"`
	// Presenters are the presenters the binding does not name among those the server saw last
	// (at most 8), the most recent first.
	Presenters []MisusePresenter `json:"presenters,omitempty"`
}

// MisusePresenter is one presenter of a misuse: who it proved it was ("" when it proved
// nothing) and from where.
type MisusePresenter struct {
	// Principal is system:serviceaccount:NS:NAME, a SPIFFE ID, jwk:THUMBPRINT, or "" (no proof).
	Principal string `json:"principal"`
	// Address is the client's address as the server knew it ("" when it did not).
	Address string `json:"address"`
	// Requests counts its requests the server saw; LastSeen is when the last was.
	Requests int64     `json:"requests"`
	LastSeen time.Time `json:"lastSeen"`
}

// CreditsData is a key's credit balance in a period, as the API server counted it
// (status.credits) when it wrote it last.
type CreditsData struct {
	// Period names the period (status.credits.period).
	Period string `json:"period"`
	// PeriodEnd is when the period ends and the credits refill.
	PeriodEnd time.Time `json:"periodEnd"`
	// Used and Remaining are the credits spent and left in the period when counted.
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// Amount is the period's credits, Used + Remaining: spec.credits.amount as the server
	// applied it.
	Amount int64 `json:"amount"`
	// ThresholdPercent is the threshold crossed, 80 or 90 (credits_low only).
	ThresholdPercent int `json:"thresholdPercent,omitempty"`
}

// Message is one delivery's content: the same on every attempt, so that a receiver that
// verified and processed it once recognises it by ID.
type Message struct {
	// ID is the webhook-id.
	ID string
	// Body is the event's JSON, exactly as signed and sent.
	Body []byte
}

// MaxBodyBytes bounds a message's body: the specification recommends payloads under 20 KB.
const MaxBodyBytes = 20 << 10

// Bounds of the free-text fields, the schemas' maxLength.
const (
	maxReasonChars = 1024
	maxURLChars    = 2048
	// maxPeriodChars is status.credits.period's MaxLength.
	maxPeriodChars = 32
	// maxCredits is the largest count of credits a period holds: a rollover's cap and eight
	// grants, each at most v1alpha1.CreditsMaxAmount (2^40).
	maxCredits = 9 << 40
	// The bounds of status.binding's presenters (v1alpha1): how many, a principal, an address.
	maxMisusePresenters = 8
	maxPrincipalChars   = 320
	maxAddressChars     = 64
)

// hintPattern is what a key hint looks like (apikey.Hint): a prefix, "_live_", four characters,
// "…", four characters. A whole key never matches it, so a payload that passes cannot carry one.
var hintPattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}_live_[0-9A-Za-z]{4}…[0-9A-Za-z]{4}$`)

// principalPattern is what a presenter's principal looks like (status.binding): a
// ServiceAccount, a SPIFFE ID, a JWK thumbprint, or nothing. A key matches none of them.
var principalPattern = regexp.MustCompile(`^(|system:serviceaccount:[a-z0-9.-]+:[a-z0-9.-]+|spiffe://[^\s]+|jwk:[A-Za-z0-9_-]{43})$`)

// addressPattern is what a client's address looks like: an IPv4 or IPv6 address, perhaps with
// a port or a zone.
var addressPattern = regexp.MustCompile(`^[0-9A-Fa-f:.\[\]]*(%[0-9A-Za-z.-]+)?[\]:0-9]*$`)

// namePattern is what a Kubernetes namespace or object name looks like (DNS subdomain).
var namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// NewMessage checks e against its type's rules (those of its schema) and encodes it as the
// message id sends.
func NewMessage(id string, e Event) (Message, error) {
	if err := ValidateID(id); err != nil {
		return Message{}, err
	}
	if err := e.Validate(); err != nil {
		return Message{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return Message{}, fmt.Errorf("event %s: %w", e.Type, err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(body) > MaxBodyBytes {
		return Message{}, fmt.Errorf("event %s: %d bytes encoded, more than %d", e.Type, len(body), MaxBodyBytes)
	}
	return Message{ID: id, Body: body}, nil
}

// Validate says what makes e an event no receiver should get, or nil: the rules of its type's
// schema, so that what NewMessage encodes validates against it.
func (e Event) Validate() error {
	var errs []error
	if !e.Type.Known() {
		return fmt.Errorf("event type %q is none of switchboard's", e.Type)
	}
	if e.Timestamp.IsZero() {
		errs = append(errs, errors.New("no timestamp"))
	}
	d := e.Data
	if !namePattern.MatchString(d.Namespace) || !namePattern.MatchString(d.Name) {
		errs = append(errs, fmt.Errorf("namespace %q, name %q: not a Kubernetes object's", d.Namespace, d.Name))
	}
	if d.KeyGeneration < 1 {
		errs = append(errs, fmt.Errorf("keyGeneration %d: at least 1", d.KeyGeneration))
	}
	// The hints are checked by shape and never quoted: something that is not a hint may be a key.
	if !hintPattern.MatchString(d.KeyHint) {
		errs = append(errs, errors.New("keyHint is not a key hint (sb_live_AbCd…wxyz)"))
	}
	switch e.Type {
	case KeyRotated, KeyRenewed:
		if d.PreviousKeyHint != "" && !hintPattern.MatchString(d.PreviousKeyHint) {
			errs = append(errs, errors.New("previousKeyHint is not a key hint (sb_live_AbCd…wxyz)"))
		}
	default:
		if d.PreviousKeyHint != "" {
			errs = append(errs, fmt.Errorf("previousKeyHint: only in %s and %s", KeyRotated, KeyRenewed))
		}
	}
	if n := utf8.RuneCountInString(d.Reason); n > maxReasonChars {
		errs = append(errs, fmt.Errorf("reason: %d characters, more than %d", n, maxReasonChars))
	}
	if e.Type == KeyLeaked {
		if u, err := url.Parse(d.URL); err != nil || !u.IsAbs() || u.Host == "" || len(d.URL) > maxURLChars {
			errs = append(errs, fmt.Errorf("url: where the key was found, an absolute URL of at most %d characters", maxURLChars))
		}
	} else if d.URL != "" {
		errs = append(errs, fmt.Errorf("url: only in %s", KeyLeaked))
	}
	switch e.Type {
	case KeyExpiring, KeyExpired:
		if d.ExpiresAt == nil {
			errs = append(errs, errors.New("expiresAt: when the key ends"))
		}
	default:
		if d.ExpiresAt != nil {
			errs = append(errs, fmt.Errorf("expiresAt: only in %s and %s", KeyExpiring, KeyExpired))
		}
	}
	errs = append(errs, validateCredits(e.Type, d.Credits)...)
	errs = append(errs, validateMisuse(e.Type, d.Misuse)...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("event %s: %w", e.Type, err)
	}
	return nil
}

// validateCredits checks data.credits: present in the credit events alone, a period, counts
// within bounds that add up, and a threshold in credits_low alone.
func validateCredits(t EventType, c *CreditsData) []error {
	if !slices.Contains(creditTypes, t) {
		if c != nil {
			return []error{fmt.Errorf("credits: only in %s, %s and %s", KeyCreditsLow, KeyCreditsExhausted, KeyCreditsRefilled)}
		}
		return nil
	}
	if c == nil {
		return []error{errors.New("credits: the key's balance")}
	}
	var errs []error
	if c.Period == "" || len(c.Period) > maxPeriodChars {
		errs = append(errs, fmt.Errorf("credits.period: 1 to %d characters", maxPeriodChars))
	}
	if c.PeriodEnd.IsZero() {
		errs = append(errs, errors.New("credits.periodEnd: when the period ends"))
	}
	if c.Used < 0 || c.Remaining < 0 || c.Amount < 1 || c.Amount > maxCredits || c.Used+c.Remaining != c.Amount {
		errs = append(errs, fmt.Errorf("credits: used %d and remaining %d do not add up to an amount of 1 to %d (%d)", c.Used, c.Remaining, int64(maxCredits), c.Amount))
	}
	switch {
	case t == KeyCreditsLow && !slices.Contains(CreditThresholds, c.ThresholdPercent):
		errs = append(errs, fmt.Errorf("credits.thresholdPercent: one of %v", CreditThresholds))
	case t != KeyCreditsLow && c.ThresholdPercent != 0:
		errs = append(errs, fmt.Errorf("credits.thresholdPercent: only in %s", KeyCreditsLow))
	}
	return errs
}

// validateMisuse checks data.misuse: present in apikey.misused alone, a mode, at least one
// misuse and when, and presenters within status.binding's bounds.
func validateMisuse(t EventType, m *MisuseData) []error {
	if t != KeyMisused {
		if m != nil {
			return []error{fmt.Errorf("misuse: only in %s", KeyMisused)}
		}
		return nil
	}
	if m == nil {
		return []error{errors.New("misuse: what the key's misuses were")}
	}
	var errs []error
	if m.Mode != "ReportOnly" && m.Mode != "Enforce" {
		errs = append(errs, errors.New("misuse.mode: ReportOnly or Enforce"))
	}
	if m.Misuses < 1 {
		errs = append(errs, fmt.Errorf("misuse.misuses %d: at least 1", m.Misuses))
	}
	if m.LastMisuseAt.IsZero() {
		errs = append(errs, errors.New("misuse.lastMisuseAt: when the last misuse was seen"))
	}
	if len(m.Presenters) > maxMisusePresenters {
		errs = append(errs, fmt.Errorf("misuse.presenters: %d, at most %d", len(m.Presenters), maxMisusePresenters))
	}
	for i, p := range m.Presenters {
		// Checked by shape and never quoted, like the hints.
		if len(p.Principal) > maxPrincipalChars || !principalPattern.MatchString(p.Principal) ||
			len(p.Address) > maxAddressChars || !addressPattern.MatchString(p.Address) || p.Requests < 0 || p.LastSeen.IsZero() {
			errs = append(errs, fmt.Errorf("misuse.presenters[%d]: a principal (system:serviceaccount:NS:NAME, spiffe://…, jwk:THUMBPRINT or none) of at most %d characters, an address of at most %d, a count and when", i, maxPrincipalChars, maxAddressChars))
		}
	}
	return errs
}

// Known says whether t is one of EventTypes.
func (t EventType) Known() bool {
	return slices.Contains(EventTypes, t)
}

//go:embed schema/*.json
var schemas embed.FS

// Schema returns the JSON Schema (Draft 2020-12) of t's payloads, for receivers and docs, or
// nil when t is not Known.
func Schema(t EventType) []byte {
	if !t.Known() {
		return nil
	}
	b, err := schemas.ReadFile("schema/" + string(t) + ".json")
	if err != nil {
		panic(fmt.Sprintf("the schema of %s is not embedded: %v", t, err)) // a test checks every type's
	}
	return b
}
