package leakreceiver

import (
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/go-logr/logr"

	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/frontdoor"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver/secretscanning"
)

// Who is heard, and when: a request without a signature GitHub could have made is refused from
// its headers, its body unread, and charged to its client address's budget; an address that
// spent it is refused from its headers too; a verified request takes from the shared limit only
// when it needs a call, and waits for the index to judge keys.

// MaxBody is the largest body the receiver reads, for the front door that reads it first
// (frontdoor.HTTPLimits.MaxBody).
func (r *Receiver) MaxBody() int64 {
	if r.cfg.MaxBody > 0 {
		return r.cfg.MaxBody
	}
	return max(secretscanning.DefaultMaxWebhookBody, int64(r.cfg.MaxBatch)*secretscanning.MaxPartnerEntryBytes,
		int64(secretscanning.DefaultMaxBatch)*secretscanning.MaxPartnerEntryBytes)
}

// BeforeBody is the front door's question before it reads a request's body
// (frontdoor.HTTPLimits.BeforeBody): it refuses, from the headers alone, a request from an
// address that spent its budget of unverified requests (429), and one without a signature
// GitHub could have made (401, charged to its address), so that neither body is read. Other
// requests (another route: the handler's 404 or 405) go on.
func (r *Receiver) BeforeBody(req *http.Request) *frontdoor.Refusal {
	var src string
	var check func(http.Header) error
	switch {
	case req.Method != http.MethodPost:
		return nil
	case req.URL.Path == PartnerPath && r.partner != nil:
		src, check = sourcePartner, secretscanning.CheckPartnerHeaders
	case req.URL.Path == AlertsPath && r.webhook != nil:
		src, check = sourceAlert, secretscanning.CheckAlertHeaders
	default:
		return nil
	}
	now := r.cfg.Clock.Now()
	client := r.client(req)
	if blocked, wait := r.clients.blocked(client, now); blocked {
		requests.WithLabelValues(src, "client_limited").Inc()
		return refusal(http.StatusTooManyRequests, "too many requests without a valid signature from this address", retryAfter(wait))
	}
	if err := check(req.Header); err != nil {
		r.clients.charge(client, now)
		requests.WithLabelValues(src, "unauthenticated").Inc()
		r.cfg.Logger.V(1).Info("a leak report refused", "source", src, "status", http.StatusUnauthorized, "reason", err.Error())
		return refusal(http.StatusUnauthorized, http.StatusText(http.StatusUnauthorized), "")
	}
	return nil
}

// refusal is a plain-text answer sent by the front door.
func refusal(status int, msg, retry string) *frontdoor.Refusal {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}}
	if retry != "" {
		h.Set("Retry-After", retry)
	}
	return &frontdoor.Refusal{Status: status, Header: h, Body: []byte(msg + "\n")}
}

// retryAfter is a Retry-After of at least a second.
func retryAfter(wait time.Duration) string { return strconv.Itoa(max(1, int(wait.Seconds()+0.999))) }

// client is the address req's unverified requests are counted under: the peer's, or the one a
// trusted proxy forwards (clientaddr.From, as /v1 reads it).
func (r *Receiver) client(req *http.Request) netip.Addr {
	return clientaddr.From(clientaddr.Parse(req.RemoteAddr), req.Header["X-Forwarded-For"], r.cfg.TrustedProxies)
}

// verified is the body of a request GitHub signed, read by verify. The request's client is
// refused before a byte of its body is read when that address has spent its budget of
// unverified requests (BeforeBody did so already for a request with a body; this is for one
// without, and for a Receiver served without the door); a request whose signature does not
// verify, or cannot be verified, is refused and charged to its client's budget: a request
// GitHub did not sign spends its sender's budget alone. False when it answered the request.
func (r *Receiver) verified(w http.ResponseWriter, req *http.Request, log logr.Logger, src string, verify func(*http.Request) ([]byte, error)) ([]byte, bool) {
	client := r.client(req)
	if blocked, wait := r.clients.blocked(client, r.cfg.Clock.Now()); blocked {
		requests.WithLabelValues(src, "client_limited").Inc()
		w.Header().Set("Connection", "close") // its body is not wanted
		w.Header().Set("Retry-After", retryAfter(wait))
		http.Error(w, "too many requests without a valid signature from this address", http.StatusTooManyRequests)
		return nil, false
	}
	body, err := verify(req)
	if err != nil {
		r.clients.charge(client, r.cfg.Clock.Now())
		if status := secretscanning.HTTPStatus(err); status == http.StatusUnauthorized || status == http.StatusRequestEntityTooLarge {
			w.Header().Set("Connection", "close") // what is left of its body is not wanted
		}
		r.refuse(w, log, src, err)
		return nil, false
	}
	return body, true
}

// ready answers 503 to a verified report while the index cannot judge keys.
func (r *Receiver) ready(w http.ResponseWriter, src string) bool {
	if r.cfg.Ready() {
		return true
	}
	requests.WithLabelValues(src, "unavailable").Inc()
	w.Header().Set("Retry-After", "5")
	http.Error(w, "the server's index of keys has not synced yet; send the report again", http.StatusServiceUnavailable)
	return false
}

// allowCalls takes a call of the shared limit for a verified request, or answers 429.
func (r *Receiver) allowCalls(w http.ResponseWriter, src string, now time.Time) bool {
	if r.limiter.AllowN(now, 1) {
		return true
	}
	requests.WithLabelValues(src, "rate_limited").Inc()
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(1/r.cfg.Rate))))
	http.Error(w, "too many requests", http.StatusTooManyRequests)
	return false
}

// refuse answers a request that could not be read, verified or handled, with secretscanning's
// status; its error names no token. A server error (GitHub's API unavailable or unreadable) is
// logged with why, so that the platform learns why a leak went unhandled.
func (r *Receiver) refuse(w http.ResponseWriter, log logr.Logger, src string, err error) {
	status := secretscanning.HTTPStatus(err)
	requests.WithLabelValues(src, outcome(status)).Inc()
	if status >= http.StatusInternalServerError {
		log.Error(err, "a leak report could not be handled", "status", status)
	} else {
		log.V(1).Info("a leak report refused", "status", status, "reason", err.Error())
	}
	http.Error(w, http.StatusText(status), status)
}

// outcome names a refusal's status for the metrics.
func outcome(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusBadRequest:
		return "malformed"
	case http.StatusBadGateway:
		return "bad_gateway"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "failed"
}

// outcomeAccepted names an accepted request: replayed when every key it reports was one this
// replica remembers recording.
func outcomeAccepted(replayed bool) string {
	if replayed {
		return "replayed"
	}
	return "accepted"
}
