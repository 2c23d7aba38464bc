package panel

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// revokeForm asks for confirmation before revoking.
func (h *handler) revokeForm(w http.ResponseWriter, r *http.Request, s *session) {
	h.confirmPage(w, r, s, "revoke", "Revoke key")
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
	if msg := validTarget(ns, name); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	key, already, err := h.keys(s).Revoke(ctx, ns, name, nil)
	if err != nil {
		h.fail(w, r, s, data, describe(err, action{Namespace: ns, Name: name}))
		return
	}
	if !already {
		h.deps.Logger.Info("revoked APIKey", "user", s.user, "namespace", ns, "name", name, "hint", key.Status.KeyHint)
	}
	h.sessions.setFlash(s, fmt.Sprintf("APIKey “%s” (%s) is revoked: requests with it now get 401 API_KEY_INVALID.", name, key.Status.KeyHint))
	http.Redirect(w, r, keysURL(ns), http.StatusSeeOther)
}
