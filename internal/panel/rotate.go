package panel

import (
	"context"
	"net/http"
	"time"

	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// rotateForm asks for the grace period. Its hidden requestedAt makes the POST idempotent:
// posting the same form twice requests one rotation, not two.
func (h *handler) rotateForm(w http.ResponseWriter, r *http.Request, s *session) {
	h.confirmPage(w, r, s, "rotate", "Rotate key")
}

// rotateKey requests a rotation with the person's token, waits for the operator to carry it
// out and shows the new key once. If someone else claims the new key first, the workflow
// stops it by rotating again and the page says so loudly (keyclient.Client.Rotate).
func (h *handler) rotateKey(w http.ResponseWriter, r *http.Request, s *session) {
	ns, name := r.PostFormValue("namespace"), r.PostFormValue("name")
	data := h.newKeysData(s, ns)
	grace, ok := find(graceChoices, r.PostFormValue("grace"))
	if !ok {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "Choose when the previous key stops working."})
		return
	}
	requestedAt := r.PostFormValue("requested_at")
	if _, err := time.Parse(time.RFC3339Nano, requestedAt); err != nil || len(requestedAt) > 64 {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: "The rotate form is damaged; open it again from the table."})
		return
	}
	if msg := validTarget(ns, name); msg != "" {
		h.fail(w, r, s, data, problem{Status: http.StatusBadRequest, Message: msg})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.deps.RevealTimeout+30*time.Second)
	defer cancel()
	h.deps.Logger.Info("rotating APIKey", "user", s.user, "namespace", ns, "name", name, "gracePeriod", grace.Duration.String())
	issued, err := h.keys(s).Rotate(ctx, ns, name, keyclient.RotateRequest{RequestedAt: requestedAt, Grace: grace.Duration, Timeout: h.deps.RevealTimeout})
	if err != nil {
		h.fail(w, r, s, data, describe(err, action{Namespace: ns, Name: name}))
		return
	}
	h.deps.Logger.Info("rotated APIKey", "user", s.user, "namespace", ns, "name", name, "previousHint", issued.Replaced, "hint", issued.Hint())
	h.showIssued(w, r, s, data, issued)
}
