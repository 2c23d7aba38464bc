package panel

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// parsePolicy reads the create form's optional rate limit, burst, source ranges and audiences,
// or says in one sentence what is wrong with them.
func parsePolicy(f createForm) (keyclient.Policy, string) {
	var p keyclient.Policy
	burst := 0
	if b := strings.TrimSpace(f.Burst); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			return p, "The burst is a whole number of requests, at least 1."
		}
		burst = n
	}
	rl, err := keyclient.ParseRateLimit(f.RateLimit, burst)
	if err != nil {
		return p, "Rate limit: " + err.Error() + "."
	}
	ranges, err := keyclient.ParseSourceRanges(strings.FieldsFunc(f.Sources, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }))
	if err != nil {
		return p, "Allowed sources: " + err.Error() + "."
	}
	audiences, err := keyclient.ParseAudiences(f.Audiences)
	if err != nil {
		return p, "Audiences: " + err.Error() + "."
	}
	p.RateLimit, p.AllowedSourceRanges, p.Audiences = rl, ranges, audiences
	return p, ""
}

// createKey creates an APIKey with the person's token, waits for the operator to issue its
// key, claims the reveal Secret and shows the key in this very response, once. When the key
// cannot be shown (the operator too slow, someone else claimed it first) the APIKey is deleted
// again, as the plugin does: a key nobody saw, or that someone else holds, is not kept.
func (h *handler) createKey(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.PostFormValue("namespace")
	data := h.newKeysData(s, ns)
	data.Form = createForm{Name: r.PostFormValue("name"), Description: r.PostFormValue("description"), Expires: r.PostFormValue("expires"),
		RateLimit: r.PostFormValue("rate_limit"), Burst: r.PostFormValue("burst"), Sources: r.PostFormValue("sources"), Audiences: r.PostFormValue("audiences")}
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
	expiry, ok := find(expiryChoices, data.Form.Expires)
	if !ok {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "Choose an expiry from the list."})
		return
	}
	policy, msg := parsePolicy(data.Form)
	if msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return
	}
	key := &switchboardv1alpha1.APIKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: data.Form.Name},
		Spec:       switchboardv1alpha1.APIKeySpec{Description: data.Form.Description},
	}
	policy.Apply(&key.Spec)
	if expiry.Duration > 0 {
		at := metav1.NewTime(h.deps.Clock.Now().Add(expiry.Duration).Truncate(time.Second))
		key.Spec.ExpiresAt = &at
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.deps.RevealTimeout+30*time.Second)
	defer cancel()
	issued, err := h.keys(s).Create(ctx, key, h.deps.RevealTimeout)
	if err != nil {
		p := describe(err, action{Namespace: ns, Name: key.Name})
		if key.UID != "" {
			h.deps.Logger.Info("created APIKey, could not show its key and deleted it again", "user", s.user, "namespace", ns, "name", key.Name)
			data.Form = createForm{}
		}
		h.fail(w, r, s, data, p)
		return
	}
	h.deps.Logger.Info("created APIKey", "user", s.user, "namespace", ns, "name", key.Name)
	data.Form = createForm{}
	h.showIssued(w, r, s, data, issued)
}
