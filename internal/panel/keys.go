package panel

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/reveal"
)

// keysData is the data of the "API keys" page.
type keysData struct {
	layout
	Namespaces       []string
	Notice           string
	Error            string
	Revealed         *revealedKey
	Keys             []keyRow
	KeysError        string
	Connections      []connRow
	ConnectionsError string
	Form             createForm
	ExpiryChoices    []expiryChoice

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
}

// createForm keeps what a person typed when creating a key fails, so nothing is lost.
type createForm struct {
	Name        string
	Description string
	Expires     string
}

// expiryChoice is an option of the create form's expiry select.
type expiryChoice struct {
	Value string
	Label string
	After time.Duration
}

// expiryChoices are the expiries offered at creation; "" never expires.
var expiryChoices = []expiryChoice{
	{"", "Never", 0},
	{"7d", "In 7 days", 7 * 24 * time.Hour},
	{"30d", "In 30 days", 30 * 24 * time.Hour},
	{"90d", "In 90 days", 90 * 24 * time.Hour},
	{"365d", "In 1 year", 365 * 24 * time.Hour},
}

func findExpiry(v string) (expiryChoice, bool) {
	for _, c := range expiryChoices {
		if c.Value == v {
			return c, true
		}
	}
	return expiryChoice{}, false
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
		now := h.opts.Clock.Now()
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
			data.Keys = keyRows(keys.Items, now)
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

// createKey creates an APIKey with the person's token, waits for the operator to issue its
// key, claims the reveal Secret and shows the key in this very response, once.
func (h *handler) createKey(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.PostFormValue("namespace")
	data := h.newKeysData(s, ns)
	data.Form = createForm{Name: r.PostFormValue("name"), Description: r.PostFormValue("description"), Expires: r.PostFormValue("expires")}
	if msg := validNamespace(ns); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return
	}
	if msg := validKeyName(data.Form.Name); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return
	}
	if len(data.Form.Description) > 256 {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "The description is at most 256 characters."})
		return
	}
	expiry, ok := findExpiry(data.Form.Expires)
	if !ok {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "Choose an expiry from the list."})
		return
	}
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: data.Form.Name},
		Spec:       switchboardv1alpha1.APIKeySpec{Description: data.Form.Description},
	}
	if expiry.After > 0 {
		at := metav1.NewTime(h.opts.Clock.Now().Add(expiry.After).Truncate(time.Second))
		key.Spec.ExpiresAt = &at
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.RevealTimeout+30*time.Second)
	defer cancel()
	act := action{Verb: "create", Resource: "apikeys", Group: switchboardv1alpha1.GroupVersion.Group, Namespace: ns, Name: key.Name}
	if p := checkAccess(ctx, s.client, ns, createNeeds); p != nil {
		h.fail(w, r, s, data, *p)
		return
	}
	if err := s.client.Create(ctx, key); err != nil {
		h.fail(w, r, s, data, describe(err, act))
		return
	}
	h.opts.Logger.Info("created APIKey", "user", s.user, "namespace", ns, "name", key.Name)
	data.Form = createForm{}
	issued, err := h.waitForKey(ctx, s.client, key, "created", func(k *switchboardv1alpha1.APIKey) bool {
		return k.Status.KeyGeneration >= 1 && k.Status.RevealSecretName != ""
	})
	if err != nil {
		p := describe(err, act.with("get"))
		if !p.SignedOut && !errors.As(err, new(*timeoutError)) {
			// Say the APIKey exists, so that nobody creates it twice.
			p.Message = "APIKey “" + key.Name + "” was created, but its key cannot be shown. " + p.Message
		}
		h.fail(w, r, s, data, p)
		return
	}
	h.claimAndShow(w, r, s, data, issued, viaCreate)
}

// with returns the action with another verb on the same object.
func (a action) with(verb string) action {
	a.Verb = verb
	return a
}

// How a key came to be shown, for the messages around it.
const (
	viaCreate = "created"
	viaRotate = "rotated"
	viaReveal = "pending"
)

// claimAndShow claims the published reveal Secret and renders the key once.
func (h *handler) claimAndShow(w http.ResponseWriter, r *http.Request, s *session, data keysData, key *switchboardv1alpha1.APIKey, via string) {
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	// The status names the reveal Secret of its current key generation only, and waitForKey
	// waited for the generation wanted, so what Claim returns is the key to show.
	revealed, err := reveal.Claim(ctx, s.client, key)
	if err != nil {
		p := describe(err, action{Verb: "get", Resource: "secrets", Namespace: key.Namespace, Name: key.Name})
		if via != viaReveal && !p.SignedOut {
			p.Message = "APIKey “" + key.Name + "” was " + via + ", but its key cannot be shown. " + p.Message
		}
		h.fail(w, r, s, data, p)
		return
	}
	h.opts.Logger.Info("revealed APIKey", "user", s.user, "namespace", key.Namespace, "name", key.Name, "hint", revealed.Hint, "keyGeneration", revealed.Generation)
	data.Revealed = &revealedKey{Name: key.Name, Key: revealed.Key, Hint: revealed.Hint, Rotated: revealed.Generation > 1}
	data.claimed = key.Status.RevealSecretName
	if v := key.Status.PreviousKeyValidUntil; v != nil && h.opts.Clock.Now().Before(v.Time) {
		data.Revealed.PreviousValidUntil = v.UTC().Format("2006-01-02 15:04 UTC")
	}
	data.ReplaceURL = keysURL(key.Namespace)
	h.showKeys(w, r, s, http.StatusOK, data)
}

// revealKey claims a key that is waiting to be shown: one whose creation timed out in the
// panel, or that was created with kubectl and not yet claimed.
func (h *handler) revealKey(w http.ResponseWriter, r *http.Request, s *session) {
	ns, name := r.PostFormValue("namespace"), r.PostFormValue("name")
	data := h.newKeysData(s, ns)
	key, ok := h.getKey(w, r, s, data, ns, name)
	if !ok {
		return
	}
	if key.Status.RevealSecretName == "" {
		h.fail(w, r, s, data, describe(reveal.ErrNotPublished, action{Namespace: ns, Name: name}))
		return
	}
	h.claimAndShow(w, r, s, data, key, viaReveal)
}

// getKey reads one APIKey for a form or an action, showing the error line when it cannot.
func (h *handler) getKey(w http.ResponseWriter, r *http.Request, s *session, data keysData, ns, name string) (*switchboardv1alpha1.APIKey, bool) {
	if msg := validNamespace(ns); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return nil, false
	}
	if msg := validKeyName(name); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	var key switchboardv1alpha1.APIKey
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &key); err != nil {
		h.fail(w, r, s, data, describe(err, action{Verb: "get", Resource: "apikeys", Group: switchboardv1alpha1.GroupVersion.Group, Namespace: ns, Name: name}))
		return nil, false
	}
	return &key, true
}
