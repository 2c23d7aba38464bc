package leakreceiver

import (
	"errors"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver/secretscanning"
)

// The receiver's routes: the paths registered with GitHub (docs/leaks.md).
const (
	// PartnerPath receives the secret scanning partner program's requests.
	PartnerPath = "/github/secret-scanning"
	// AlertsPath receives an organization's secret_scanning_alert webhook.
	AlertsPath = "/github/alerts"
)

// Config configures a Receiver: where records go, which of GitHub's ways are served, and the
// bounds. Secrets are given as values; the caller reads them from their files.
type Config struct {
	// Index tells issued keys from others: a hash it holds (a current key, or a previous one not
	// yet removed) was issued here, and one it records as leaked was recorded already.
	Index *keyindex.Index
	// Client creates the LeakReports; nothing else is asked of it.
	Client client.Client
	// Namespace is the system namespace, where the records go (and the catch-up's Lease).
	Namespace string
	// KeyPrefix begins every key this installation issues.
	KeyPrefix string
	// TrustedProxies are the peers whose X-Forwarded-For names the client (the server's
	// --trusted-proxies), by whose address unverified requests are limited.
	TrustedProxies []netip.Prefix

	// Partner serves PartnerPath, verified with the keys published at PublicKeysURL (fetched with
	// PublicKeysToken when set).
	Partner         bool
	PublicKeysURL   string
	PublicKeysToken string
	// WebhookSecret, when set, serves AlertsPath: it verifies the deliveries, and APIToken
	// fetches the alerts' tokens from the REST API at APIBaseURL.
	WebhookSecret []byte
	APIToken      string
	APIBaseURL    string
	// CatchUp lists the organization's open alerts, for the leaks whose delivery was lost.
	CatchUp CatchUp
	// Ready says when the index can judge keys (default: always). Until then a verified
	// report is answered 503, so that GitHub sends it again (the catch-up finds an
	// organization's alert): a key must never be judged against a partial index, nor a leak
	// remembered as a false positive for it.
	Ready func() bool

	// MaxBody bounds a request's body; MaxBatch the reports of one partner request.
	MaxBody  int64
	MaxBatch int
	// Rate and Burst limit, across all senders, the verified requests that need a call: to
	// GitHub's REST API (an alert's token) or to the API server (a record). A safety bound on
	// those calls: only GitHub's signature gets a request this far, and a replay, answered from
	// memory, takes nothing.
	Rate  float64
	Burst int
	// ClientRate and ClientBurst limit, per client address (an IPv6 client by its /64), the
	// requests that carry no valid signature; past them, 429 before the body is read. Clients
	// bounds the addresses remembered.
	ClientRate  float64
	ClientBurst int
	Clients     int
	// Replays bounds the handled alerts and recorded keys remembered, each for ReplayTTL, so
	// that a delivery of them again costs no call.
	Replays   int
	ReplayTTL time.Duration

	// HTTPClient makes the requests to GitHub (default: http.DefaultTransport's, with the
	// secretscanning package's timeouts).
	HTTPClient *http.Client
	// Clock stamps the records and paces the limiters and the replays (default: the real
	// clock).
	Clock clock.PassiveClock
	// Logger logs each report by its hint, never the key.
	Logger logr.Logger
}

// Receiver is the http.Handler of the leak reports listener.
type Receiver struct {
	cfg     Config
	partner *secretscanning.Partner
	webhook *secretscanning.AlertWebhook
	alerts  *secretscanning.AlertClient
	// limiter bounds the calls of verified requests, clients the unverified requests of each
	// address, replays what was answered.
	limiter *rate.Limiter
	clients *clientBudgets
	replays *replays
	mux     *http.ServeMux
}

// New builds the Receiver of cfg; it fetches nothing until the first request.
func New(cfg Config) (*Receiver, error) {
	if cfg.Index == nil || cfg.Client == nil || cfg.Namespace == "" {
		return nil, errors.New("leak reports: an index, a client and the system namespace are required")
	}
	if !cfg.Partner && len(cfg.WebhookSecret) == 0 {
		return nil, errors.New("leak reports: neither the partner program nor an organization's webhook is configured")
	}
	if cfg.Rate <= 0 || cfg.Burst <= 0 || cfg.ClientRate <= 0 || cfg.ClientBurst <= 0 || cfg.Clients <= 0 || cfg.Replays <= 0 || cfg.ReplayTTL <= 0 {
		return nil, errors.New("leak reports: every rate and bound must be positive (the configuration's leakReports, validated)")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	r := &Receiver{
		cfg: cfg, limiter: rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst), mux: http.NewServeMux(),
		clients: newClientBudgets(cfg.ClientRate, cfg.ClientBurst, cfg.Clients), replays: newReplays(cfg.Replays, cfg.ReplayTTL),
	}
	if cfg.Partner {
		keys, err := secretscanning.NewKeySet(secretscanning.KeySetOptions{
			URL: cfg.PublicKeysURL, Token: cfg.PublicKeysToken, Client: cfg.HTTPClient, Clock: cfg.Clock,
		})
		if err != nil {
			return nil, err
		}
		if r.partner, err = secretscanning.NewPartner(secretscanning.PartnerOptions{
			Keys: keys, Prefix: cfg.KeyPrefix, MaxBody: cfg.MaxBody, MaxBatch: cfg.MaxBatch,
		}); err != nil {
			return nil, err
		}
		r.mux.HandleFunc("POST "+PartnerPath, r.servePartner)
	}
	if len(cfg.WebhookSecret) > 0 {
		var err error
		if r.webhook, err = secretscanning.NewAlertWebhook(secretscanning.AlertWebhookOptions{
			Secret: cfg.WebhookSecret, MaxBody: cfg.MaxBody,
		}); err != nil {
			return nil, err
		}
		if r.alerts, err = secretscanning.NewAlertClient(secretscanning.AlertClientOptions{
			APIBase: cfg.APIBaseURL, Token: cfg.APIToken, Client: cfg.HTTPClient, Prefix: cfg.KeyPrefix,
		}); err != nil {
			return nil, err
		}
		r.mux.HandleFunc("POST "+AlertsPath, r.serveAlert)
	}
	if err := r.cfg.CatchUp.check(len(cfg.WebhookSecret) > 0); err != nil {
		return nil, err
	}
	return r, nil
}

// ServeHTTP serves the routes; each limits a request by its client's budget before a byte of
// its body is read, and by the shared limit only once verified and in need of a call.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// servePartner answers a partner program request with GitHub's feedback: true_positive for each
// token whose key was issued here, recorded before the answer (or recorded already).
func (r *Receiver) servePartner(w http.ResponseWriter, req *http.Request) {
	log := r.cfg.Logger.WithValues("source", sourcePartner)
	body, ok := r.verified(w, req, log, sourcePartner, r.partner.Verify)
	if !ok {
		return
	}
	reports, err := r.partner.Parse(body)
	if err != nil {
		r.refuse(w, log, sourcePartner, err)
		return
	}
	if !r.ready(w, sourcePartner) {
		return
	}
	now := r.cfg.Clock.Now()
	recorded := map[apikey.Hash]bool{}
	var toRecord []secretscanning.Report
	remembered := 0
	for _, rep := range reports {
		if !rep.Candidate() {
			reportsSeen.WithLabelValues(sourcePartner, "false_positive").Inc()
			continue
		}
		if _, done := recorded[rep.Hash]; done {
			continue
		}
		switch r.known(log, sourcePartner, rep, now) {
		case knownNot:
			recorded[rep.Hash] = false
		case knownRemembered:
			remembered++
			recorded[rep.Hash] = true
		case knownRecorded:
			recorded[rep.Hash] = true
		case knownIssued:
			recorded[rep.Hash] = false // until recorded below
			toRecord = append(toRecord, rep)
		}
	}
	// Only a request that needs a call takes one of the shared limit: a replay takes nothing.
	if len(toRecord) > 0 && !r.allowCalls(w, sourcePartner, now) {
		return
	}
	for _, rep := range toRecord {
		if err := r.record(req.Context(), log, sourcePartner, switchboardv1alpha1.LeakSourceGitHubPartner, rep, ""); err != nil {
			// GitHub sends the request again: what was recorded stays one record.
			requests.WithLabelValues(sourcePartner, "failed").Inc()
			log.Error(err, "recording a leak report", "hint", rep.Hint)
			http.Error(w, "the report could not be recorded; send it again", http.StatusServiceUnavailable)
			return
		}
		recorded[rep.Hash] = true
		r.replays.rememberKey(rep.Hash, now)
	}
	requests.WithLabelValues(sourcePartner, outcomeAccepted(remembered > 0 && remembered == len(recorded))).Inc()
	writeJSON(w, http.StatusOK, secretscanning.Feedback(reports, func(h apikey.Hash) bool { return recorded[h] }))
}

// serveAlert records the token of an organization's secret scanning alert and answers 200 with
// what was done; events and actions that report no leak are answered 200 and ignored. An alert
// handled before is answered as it was, without a call.
func (r *Receiver) serveAlert(w http.ResponseWriter, req *http.Request) {
	log := r.cfg.Logger.WithValues("source", sourceAlert)
	body, ok := r.verified(w, req, log, sourceAlert, r.webhook.Verify)
	if !ok {
		return
	}
	ev, err := r.webhook.Parse(req.Header, body)
	if err != nil {
		r.refuse(w, log, sourceAlert, err)
		return
	}
	log = log.WithValues("delivery", ev.Delivery)
	if !ev.Act() {
		requests.WithLabelValues(sourceAlert, "ignored").Inc()
		log.V(1).Info("webhook delivery ignored", "why", ev.Ignored)
		writeJSON(w, http.StatusOK, alertAnswer{Result: "ignored", Detail: ev.Ignored})
		return
	}
	if !r.ready(w, sourceAlert) {
		return
	}
	id := ev.Alert.ID()
	now := r.cfg.Clock.Now()
	if result, ok := r.replays.alert(id, now); ok {
		requests.WithLabelValues(sourceAlert, "replayed").Inc()
		log.V(1).Info("an alert handled before, answered as then", "alert", id, "result", result)
		writeJSON(w, http.StatusOK, alertAnswer{Result: result, Alert: id})
		return
	}
	if !r.allowCalls(w, sourceAlert, now) {
		return
	}
	alert, err := r.alerts.Fetch(req.Context(), ev.Alert)
	if err != nil {
		r.refuse(w, log.WithValues("alert", id), sourceAlert, err)
		return
	}
	result, err := r.handleAlert(req.Context(), log, sourceAlert, alert.Report, id)
	if err != nil {
		requests.WithLabelValues(sourceAlert, "failed").Inc()
		log.Error(err, "recording a leak report", "hint", alert.Hint, "alert", id)
		http.Error(w, "the report could not be recorded; redeliver it", http.StatusServiceUnavailable)
		return
	}
	requests.WithLabelValues(sourceAlert, "accepted").Inc()
	writeJSON(w, http.StatusOK, alertAnswer{Result: result, Alert: id})
}
