package panel

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// graceChoice is an option of the rotate form: how long the previous key keeps working.
type graceChoice struct {
	Value  string
	Label  string
	Period time.Duration
}

// graceChoices are the grace periods offered at rotation.
var graceChoices = []graceChoice{
	{"0s", "Immediately (the old key stops working now)", 0},
	{"1h", "After 1 hour", time.Hour},
	{"24h", "After 24 hours", 24 * time.Hour},
	{"168h", "After 7 days", 7 * 24 * time.Hour},
}

func findGrace(v string) (graceChoice, bool) {
	for _, c := range graceChoices {
		if c.Value == v {
			return c, true
		}
	}
	return graceChoice{}, false
}

// confirmData is the data of the rotate and revoke pages.
type confirmData struct {
	layout
	Key         keyRow
	RequestedAt string
}

// rotateForm asks for the grace period. Its hidden requestedAt makes the POST idempotent:
// posting the same form twice requests one rotation, not two.
func (h *handler) rotateForm(w http.ResponseWriter, r *http.Request, s *session) {
	h.confirmPage(w, r, s, "rotate", "Rotate key")
}

// revokeForm asks for confirmation before revoking.
func (h *handler) revokeForm(w http.ResponseWriter, r *http.Request, s *session) {
	h.confirmPage(w, r, s, "revoke", "Revoke key")
}

func (h *handler) confirmPage(w http.ResponseWriter, r *http.Request, s *session, page, title string) {
	q := r.URL.Query()
	ns, name := q.Get("namespace"), q.Get("name")
	key, ok := h.getKey(w, r, s, h.newKeysData(s, ns), ns, name)
	if !ok {
		return
	}
	now := h.opts.Clock.Now()
	h.render(w, http.StatusOK, page, confirmData{
		layout:      layout{Title: title, User: s.user, CSRF: s.csrf, Namespace: ns},
		Key:         newKeyRow(key, now),
		RequestedAt: now.UTC().Format(time.RFC3339Nano),
	})
}

// rotateKey requests a rotation with the person's token, waits for the operator to carry it
// out and shows the new key once.
func (h *handler) rotateKey(w http.ResponseWriter, r *http.Request, s *session) {
	ns, name := r.PostFormValue("namespace"), r.PostFormValue("name")
	data := h.newKeysData(s, ns)
	grace, ok := findGrace(r.PostFormValue("grace"))
	if !ok {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "Choose when the previous key stops working."})
		return
	}
	requestedAt := r.PostFormValue("requested_at")
	if _, err := time.Parse(time.RFC3339Nano, requestedAt); err != nil || len(requestedAt) > 64 {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "The rotate form is damaged; open it again from the table."})
		return
	}
	key, ok := h.getKey(w, r, s, data, ns, name)
	if !ok {
		return
	}
	if key.Spec.Revoked {
		h.fail(w, r, s, data, problem{Status: http.StatusConflict, Message: "APIKey “" + name + "” is revoked and cannot be rotated: create a new key instead."})
		return
	}
	if key.Status.LastHandledRotationAt == requestedAt {
		h.fail(w, r, s, data, problem{Status: http.StatusConflict, Message: "This rotation of “" + name + "” was already carried out, and its key shown once. Rotate again to get a new key."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.RevealTimeout+30*time.Second)
	defer cancel()
	act := action{Verb: "patch", Resource: "apikeys", Group: switchboardv1alpha1.GroupVersion.Group, Namespace: ns, Name: name}
	if p := checkAccess(ctx, s.client, ns, rotateNeeds); p != nil {
		h.fail(w, r, s, data, *p)
		return
	}
	if key.Spec.Rotation == nil || key.Spec.Rotation.RequestedAt != requestedAt {
		before := key.DeepCopy()
		key.Spec.Rotation = &switchboardv1alpha1.APIKeyRotation{RequestedAt: requestedAt, GracePeriod: metav1.Duration{Duration: grace.Period}}
		if err := s.client.Patch(ctx, key, client.MergeFrom(before)); err != nil {
			h.fail(w, r, s, data, describe(err, act))
			return
		}
		h.opts.Logger.Info("rotating APIKey", "user", s.user, "namespace", ns, "name", name, "previousHint", before.Status.KeyHint, "gracePeriod", grace.Period.String())
	}
	previous := key.Status.KeyGeneration
	issued, err := h.waitForKey(ctx, s.client, key, "rotated", func(k *switchboardv1alpha1.APIKey) bool {
		return k.Status.LastHandledRotationAt == requestedAt && k.Status.KeyGeneration > previous &&
			(k.Status.RevealSecretName != "" || k.Spec.SecretName != "" || revealDone(k))
	})
	if err != nil {
		h.fail(w, r, s, data, describe(err, act.with("get")))
		return
	}
	if issued.Spec.SecretName != "" {
		h.sessions.setFlash(s, fmt.Sprintf("APIKey “%s” rotated: the new key (%s) is in Secret %s.", name, issued.Status.KeyHint, issued.Spec.SecretName))
		http.Redirect(w, r, keysURL(ns), http.StatusSeeOther)
		return
	}
	h.claimAndShow(w, r, s, data, issued, viaRotate)
}

// revealDone reports that the current key's reveal is over (claimed by someone, or expired).
func revealDone(k *switchboardv1alpha1.APIKey) bool {
	c := apimeta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed)
	return c != nil && c.ObservedGeneration >= k.Generation &&
		(c.Reason == switchboardv1alpha1.ReasonRevealClaimed || c.Reason == switchboardv1alpha1.ReasonRevealExpired)
}

// revokeKey revokes for good, with the person's token, then shows the table (POST-redirect-GET:
// there is nothing to show once).
func (h *handler) revokeKey(w http.ResponseWriter, r *http.Request, s *session) {
	ns, name := r.PostFormValue("namespace"), r.PostFormValue("name")
	data := h.newKeysData(s, ns)
	if r.PostFormValue("confirm") != "yes" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "Revoking needs confirmation: use the Revoke button of the key's row."})
		return
	}
	key, ok := h.getKey(w, r, s, data, ns, name)
	if !ok {
		return
	}
	if !key.Spec.Revoked {
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		defer cancel()
		before := key.DeepCopy()
		key.Spec.Revoked = true
		if err := s.client.Patch(ctx, key, client.MergeFrom(before)); err != nil {
			h.fail(w, r, s, data, describe(err, action{Verb: "patch", Resource: "apikeys", Group: switchboardv1alpha1.GroupVersion.Group, Namespace: ns, Name: name}))
			return
		}
		h.opts.Logger.Info("revoked APIKey", "user", s.user, "namespace", ns, "name", name, "hint", key.Status.KeyHint)
	}
	h.sessions.setFlash(s, fmt.Sprintf("APIKey “%s” (%s) is revoked: requests with it now get 401 API_KEY_INVALID.", name, key.Status.KeyHint))
	http.Redirect(w, r, keysURL(ns), http.StatusSeeOther)
}

// issueError is the operator reporting that it cannot issue the key.
type issueError struct{ name, reason, message string }

func (e *issueError) Error() string {
	return fmt.Sprintf("The operator cannot issue the key of APIKey “%s” (%s): %s", e.name, e.reason, e.message)
}

// waitForKey polls the APIKey with the person's token until issued says the operator has
// issued the wanted key, the operator reports it cannot, or RevealTimeout passes.
func (h *handler) waitForKey(ctx context.Context, c client.Client, key *switchboardv1alpha1.APIKey, what string,
	issued func(*switchboardv1alpha1.APIKey) bool) (*switchboardv1alpha1.APIKey, error) {
	var last switchboardv1alpha1.APIKey
	err := wait.PollUntilContextTimeout(ctx, h.opts.PollInterval, h.opts.RevealTimeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(key), &last); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return false, err
			}
			return false, nil // a passing hiccup of the API server: try again
		}
		if issued(&last) {
			return true, nil
		}
		ready := apimeta.FindStatusCondition(last.Status.Conditions, switchboardv1alpha1.ConditionReady)
		if ready != nil && ready.Reason == switchboardv1alpha1.ReasonDeliveryConflict && ready.ObservedGeneration >= last.Generation {
			return false, &issueError{name: key.Name, reason: ready.Reason, message: ready.Message}
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return nil, &timeoutError{name: key.Name, what: what, after: h.opts.RevealTimeout}
	}
	if err != nil {
		return nil, err
	}
	return &last, nil
}
