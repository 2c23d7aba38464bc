package panel

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

// keysData is the data of the "API keys" page.
type keysData struct {
	layout
	Namespaces []string
	Notice     string
	Error      string
	Revealed   *revealedKey
	Keys       []keyRow
	KeysError  string
	// Filter narrows the key list ("", "expiring" or "unused": the show query parameter);
	// Filters are the choices, with how many keys each shows.
	Filter           string
	Filters          []keyFilter
	Connections      []connRow
	ConnectionsError string
	Form             createForm
	ExpiryChoices    []choice

	// claimed is the reveal Secret this response claimed: the operator has not noticed yet,
	// but the table must not offer to show that key again.
	claimed string
}

// revealedKey is a key shown once, in the response to the POST that claimed it.
type revealedKey struct {
	Name               string
	Key                string
	Hint               string
	Rotated            bool
	PreviousValidUntil string
	// Stolen lists the keys of this rotation that someone else claimed first (and that were
	// stopped); Replaced is the key the rotation replaced, stopped with them.
	Stolen   string
	Replaced string
}

// createForm keeps what a person typed when creating a key fails, so nothing is lost.
type createForm struct {
	Name        string
	Description string
	Expires     string
	// RateLimit ("100/1m"), Burst, Sources ("203.0.113.0/24, 2001:db8::/32") and Audiences
	// ("billing, connections") are the key's policy, each optional; keyclient parses them as
	// the plugin's flags.
	RateLimit string
	Burst     string
	Sources   string
	Audiences string
}

// choice is an option of a form's select of durations: the expiry at creation, the grace at
// rotation.
type choice struct {
	Value    string
	Label    string
	Duration time.Duration
}

// expiryChoices are the expiries offered at creation; "" never expires.
var expiryChoices = []choice{
	{"", "Never", 0},
	{"7d", "In 7 days", 7 * 24 * time.Hour},
	{"30d", "In 30 days", 30 * 24 * time.Hour},
	{"90d", "In 90 days", 90 * 24 * time.Hour},
	{"365d", "In 1 year", 365 * 24 * time.Hour},
}

// graceChoices are the grace periods offered at rotation.
var graceChoices = []choice{
	{"0s", "Immediately (the old key stops working now)", 0},
	{"1h", "After 1 hour", time.Hour},
	{"24h", "After 24 hours", 24 * time.Hour},
	{"168h", "After 7 days", 7 * 24 * time.Hour},
}

// find is the choice whose value a form posted, if it is one of choices.
func find(choices []choice, v string) (choice, bool) {
	i := slices.IndexFunc(choices, func(c choice) bool { return c.Value == v })
	if i < 0 {
		return choice{}, false
	}
	return choices[i], true
}

// validNamespace reports what is wrong with a namespace name, or "".
func validNamespace(ns string) string {
	if ns == "" {
		return "Enter a namespace."
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "“" + ns + "” is not a valid namespace name: " + errs[0]
	}
	return ""
}

// validKeyName reports what is wrong with an APIKey name, or "".
func validKeyName(name string) string {
	if name == "" {
		return "Enter a name for the key."
	}
	if len(name) > 63 {
		return "An APIKey name is at most 63 characters."
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "“" + name + "” is not a valid name: use lower-case letters, digits and '-', starting and ending with a letter or digit."
	}
	return ""
}

// validTarget reports what is wrong with a namespace and APIKey name posted by a form, or "".
func validTarget(ns, name string) string {
	if msg := validNamespace(ns); msg != "" {
		return msg
	}
	return validKeyName(name)
}

// keysURL is the plain page of a namespace.
func keysURL(ns string) string {
	return "/keys?" + url.Values{"namespace": {ns}}.Encode()
}

// keysPage shows the keys and connections of a namespace.
func (h *handler) keysPage(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = h.sessions.lastNamespace(s)
	}
	data := h.newKeysData(s, ns)
	data.Filter = r.URL.Query().Get("show")
	data.Notice = h.sessions.takeFlash(s)
	status := http.StatusOK
	if msg := validNamespace(ns); msg != "" {
		data.Error, status = msg, http.StatusBadRequest
	} else {
		h.sessions.rememberNamespace(s, ns)
	}
	h.showKeys(w, r, s, status, data)
}

func (h *handler) newKeysData(s *session, ns string) keysData {
	return keysData{
		layout:        layout{Title: "API keys", User: s.user, CSRF: s.csrf, Namespace: ns},
		ExpiryChoices: expiryChoices,
	}
}

// showKeys fills in the namespace's keys, connections and the namespaces the person may list,
// then renders. A refusal of one list is shown in its own section; the rest still works.
func (h *handler) showKeys(w http.ResponseWriter, r *http.Request, s *session, status int, data keysData) {
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	ns := data.Namespace
	var namespaces corev1.NamespaceList
	if err := s.client.List(ctx, &namespaces, client.Limit(500)); err == nil {
		for _, n := range namespaces.Items {
			data.Namespaces = append(data.Namespaces, n.Name)
		}
	} else if apierrors.IsUnauthorized(err) {
		h.endSession(w, r, s)
		return
	}
	if validNamespace(ns) == "" {
		now := h.deps.Clock.Now()
		var keys switchboardv1alpha1.APIKeyList
		if err := s.client.List(ctx, &keys, client.InNamespace(ns)); err != nil {
			p := describe(err, action{Verb: "list", Resource: "apikeys", Group: switchboardv1alpha1.GroupVersion.Group, Namespace: ns})
			if p.SignedOut {
				h.endSession(w, r, s)
				return
			}
			data.KeysError = p.Message
		} else {
			for i := range keys.Items {
				if k := &keys.Items[i]; data.claimed != "" && k.Status.RevealSecretName == data.claimed {
					k.Status.RevealSecretName = ""
				}
			}
			data.Keys, data.Filters, data.Filter = filterKeys(keyRows(keys.Items, now), ns, data.Filter)
		}
		var conns switchboardv1alpha1.ConnectionList
		if err := s.client.List(ctx, &conns, client.InNamespace(ns)); err != nil {
			data.ConnectionsError = describe(err, action{Verb: "list", Resource: "connections", Group: switchboardv1alpha1.GroupVersion.Group, Namespace: ns}).Message
		} else {
			data.Connections = connRows(conns.Items)
		}
	}
	h.render(w, status, "keys", data)
}

// fail shows a problem as the one error line of the namespace's page, or ends the session
// when the token itself was refused.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, s *session, data keysData, p problem) {
	if p.SignedOut {
		h.endSession(w, r, s)
		return
	}
	data.Error = p.Message
	data.ReplaceURL = keysURL(data.Namespace)
	h.showKeys(w, r, s, p.Status, data)
}

// getKey reads one APIKey for a form or an action, showing the error line when it cannot.
func (h *handler) getKey(w http.ResponseWriter, r *http.Request, s *session, data keysData, ns, name string) (*switchboardv1alpha1.APIKey, bool) {
	if msg := validTarget(ns, name); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	key, err := h.keys(s).Get(ctx, ns, name)
	if err != nil {
		h.fail(w, r, s, data, describe(err, action{Namespace: ns, Name: name}))
		return nil, false
	}
	return key, true
}

// keys is the key workflow acting as the signed-in person. In impersonate mode the operator
// claims their one-time reveals for them: the panel may not read Secrets as anyone.
func (h *handler) keys(s *session) *keyclient.Client {
	opts := keyclient.Options{Clock: h.deps.Clock, PollInterval: h.deps.PollInterval}
	if h.reveal != nil && s.oidc != nil {
		opts.Claimer = &revealClaimer{reveal: h.reveal, creds: s.oidc.creds}
	}
	return keyclient.New(s.client, opts)
}

// revealClaimer claims through the operator for the person the session acts as now.
type revealClaimer struct {
	reveal *reveal.Client
	creds  *sessionCreds
}

func (r *revealClaimer) Claim(ctx context.Context, key *switchboardv1alpha1.APIKey) (keyclient.Revealed, error) {
	r.creds.mu.RLock()
	id := r.creds.impersonate
	r.creds.mu.RUnlock()
	return r.reveal.For(id.Username, id.Groups).Claim(ctx, key)
}

// confirmData is the data of the rotate and revoke pages.
type confirmData struct {
	layout
	Key         keyRow
	RequestedAt string
}

// confirmPage shows the rotate or revoke form of one key.
func (h *handler) confirmPage(w http.ResponseWriter, r *http.Request, s *session, page, title string) {
	q := r.URL.Query()
	ns, name := q.Get("namespace"), q.Get("name")
	key, ok := h.getKey(w, r, s, h.newKeysData(s, ns), ns, name)
	if !ok {
		return
	}
	now := h.deps.Clock.Now()
	h.render(w, http.StatusOK, page, confirmData{
		layout:      layout{Title: title, User: s.user, CSRF: s.csrf, Namespace: ns},
		Key:         newKeyRow(key, now),
		RequestedAt: now.UTC().Format(time.RFC3339Nano),
	})
}
