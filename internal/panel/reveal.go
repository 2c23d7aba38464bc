package panel

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// revealKey claims a key that is waiting to be shown: one created with kubectl and not yet
// claimed, or whose rotation timed out in the panel.
func (h *handler) revealKey(w http.ResponseWriter, r *http.Request, s *session) {
	ns, name := r.PostFormValue("namespace"), r.PostFormValue("name")
	data := h.newKeysData(s, ns)
	if msg := validTarget(ns, name); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.deps.RevealTimeout+30*time.Second)
	defer cancel()
	issued, err := h.keys(s).Reveal(ctx, ns, name, h.deps.RevealTimeout)
	if err != nil {
		h.fail(w, r, s, data, describe(err, action{Namespace: ns, Name: name}))
		return
	}
	h.showIssued(w, r, s, data, issued)
}

// showIssued renders a key handed over: the key itself, once, or where it was delivered.
func (h *handler) showIssued(w http.ResponseWriter, r *http.Request, s *session, data keysData, issued *keyclient.Issued) {
	key := issued.APIKey
	if len(issued.Stolen) > 0 {
		h.deps.Logger.Info("someone else claimed keys of a rotation first; each was stopped by rotating again without grace",
			"user", s.user, "namespace", key.Namespace, "name", key.Name, "stolenHints", issued.Stolen, "replacedHint", issued.Replaced)
	}
	if issued.Delivered() {
		h.sessions.setFlash(s, "APIKey “"+key.Name+"”: its key ("+issued.Hint()+") is in Secret "+key.Spec.SecretName+".")
		http.Redirect(w, r, keysURL(key.Namespace), http.StatusSeeOther)
		return
	}
	revealed := issued.Revealed
	h.deps.Logger.Info("revealed APIKey", "user", s.user, "namespace", key.Namespace, "name", key.Name, "hint", revealed.Hint, "keyGeneration", revealed.Generation)
	data.Revealed = &revealedKey{Name: key.Name, Key: revealed.Key, Hint: revealed.Hint, Rotated: revealed.Generation > 1,
		Stolen: strings.Join(issued.Stolen, ", "), Replaced: issued.Replaced}
	if data.Revealed.Replaced == "" {
		data.Revealed.Replaced = "—"
	}
	data.claimed = key.Status.RevealSecretName
	if v := issued.PreviousValidUntil(h.deps.Clock.Now()); v != nil {
		data.Revealed.PreviousValidUntil = v.Format("2006-01-02 15:04 UTC")
	}
	data.ReplaceURL = keysURL(key.Namespace)
	h.showKeys(w, r, s, http.StatusOK, data)
}
