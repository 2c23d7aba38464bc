package leakreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
	"github.com/switchboard-dev/switchboard/internal/secretscanning"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
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
	// yet removed) was issued here.
	Index *keyindex.Index
	// Client creates the LeakReports; nothing else is asked of it.
	Client client.Client
	// Namespace is the system namespace, where the records go.
	Namespace string
	// KeyPrefix begins every key this installation issues.
	KeyPrefix string

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

	// MaxBody bounds a request's body; MaxBatch the reports of one partner request.
	MaxBody  int64
	MaxBatch int
	// Rate and Burst limit the requests of all senders together, before their body is read.
	Rate  float64
	Burst int

	// HTTPClient makes the requests to GitHub (default: http.DefaultTransport's, with the
	// secretscanning package's timeouts).
	HTTPClient *http.Client
	// Clock stamps the records and paces the limiter (default: the real clock).
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
	limiter *rate.Limiter
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
	if cfg.Rate <= 0 || cfg.Burst <= 0 {
		return nil, errors.New("leak reports: the rate and burst must be positive")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	r := &Receiver{cfg: cfg, limiter: rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst), mux: http.NewServeMux()}
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
	return r, nil
}

// ServeHTTP limits the rate of every request before its route reads a byte of it.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !r.limiter.AllowN(r.cfg.Clock.Now(), 1) {
		requests.WithLabelValues(source(req.URL.Path), "rate_limited").Inc()
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(1/r.cfg.Rate))))
		http.Error(w, "too many requests", http.StatusTooManyRequests)
		return
	}
	r.mux.ServeHTTP(w, req)
}

// servePartner answers a partner program request with GitHub's feedback: true_positive for each
// token whose key was issued here, recorded before the answer.
func (r *Receiver) servePartner(w http.ResponseWriter, req *http.Request) {
	log := r.cfg.Logger.WithValues("source", sourcePartner)
	reports, err := r.partner.Read(req)
	if err != nil {
		r.refuse(w, log, sourcePartner, err)
		return
	}
	recorded := map[apikey.Hash]bool{}
	for _, rep := range reports {
		if !rep.Candidate() {
			reportsSeen.WithLabelValues(sourcePartner, "false_positive").Inc()
			continue
		}
		if _, done := recorded[rep.Hash]; done {
			continue
		}
		ok, err := r.record(req.Context(), log, switchboardv1alpha1.LeakSourceGitHubPartner, rep, "")
		if err != nil {
			// GitHub sends the request again: what was recorded stays one record.
			requests.WithLabelValues(sourcePartner, "failed").Inc()
			log.Error(err, "recording a leak report", "hint", rep.Hint)
			http.Error(w, "the report could not be recorded; send it again", http.StatusServiceUnavailable)
			return
		}
		recorded[rep.Hash] = ok
	}
	requests.WithLabelValues(sourcePartner, "accepted").Inc()
	writeJSON(w, http.StatusOK, secretscanning.Feedback(reports, func(h apikey.Hash) bool { return recorded[h] }))
}

// serveAlert records the token of an organization's secret scanning alert and answers 200 with
// what was done; events and actions that report no leak are answered 200 and ignored.
func (r *Receiver) serveAlert(w http.ResponseWriter, req *http.Request) {
	log := r.cfg.Logger.WithValues("source", sourceAlert)
	ev, err := r.webhook.Read(req)
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
	alert, err := r.alerts.Fetch(req.Context(), ev.Alert)
	if err != nil {
		r.refuse(w, log.WithValues("alert", ev.Alert.ID()), sourceAlert, err)
		return
	}
	result := "false_positive"
	if alert.Candidate() {
		ok, err := r.record(req.Context(), log, switchboardv1alpha1.LeakSourceGitHubAlert, alert.Report, ev.Alert.ID())
		if err != nil {
			requests.WithLabelValues(sourceAlert, "failed").Inc()
			log.Error(err, "recording a leak report", "hint", alert.Hint, "alert", ev.Alert.ID())
			http.Error(w, "the report could not be recorded; redeliver it", http.StatusServiceUnavailable)
			return
		}
		if ok {
			result = "recorded"
		}
	} else {
		reportsSeen.WithLabelValues(sourceAlert, "false_positive").Inc()
	}
	requests.WithLabelValues(sourceAlert, "accepted").Inc()
	writeJSON(w, http.StatusOK, alertAnswer{Result: result, Alert: ev.Alert.ID()})
}

// alertAnswer is the webhook's answer, shown in GitHub's log of deliveries.
type alertAnswer struct {
	Result string `json:"result"`
	Alert  string `json:"alert,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// record creates rep's LeakReport if its key was issued here, and says whether it was (a
// report of it already recorded counts). A key the index does not know is a false positive.
func (r *Receiver) record(ctx context.Context, log logr.Logger, src string, rep secretscanning.Report, reference string) (bool, error) {
	label := metricSource(src)
	now := r.cfg.Clock.Now()
	if _, res := r.cfg.Index.Lookup(&rep.Hash, now); res == keyindex.Unknown {
		reportsSeen.WithLabelValues(label, "not_issued").Inc()
		log.V(1).Info("a leak report of a key not issued here", "hint", rep.Hint)
		return false, nil
	}
	lr := &switchboardv1alpha1.LeakReport{
		ObjectMeta: metav1.ObjectMeta{Name: switchboardv1alpha1.LeakReportName(rep.Hash.String()), Namespace: r.cfg.Namespace},
		Spec: switchboardv1alpha1.LeakReportSpec{
			KeyHash: rep.Hash.String(), KeyHint: rep.Hint, Source: src, URL: truncate(rep.URL, 2048),
			Location: truncate(rep.Source, 64), Reference: truncate(reference, 256), ReportedAt: metav1.NewTime(now),
		},
	}
	switch err := r.cfg.Client.Create(ctx, lr); {
	case apierrors.IsAlreadyExists(err):
		reportsSeen.WithLabelValues(label, "already_recorded").Inc()
		log.Info("a leaked key reported again", "hint", rep.Hint, "url", rep.URL, "reference", reference)
		return true, nil
	case err != nil:
		return false, fmt.Errorf("creating LeakReport %s/%s: %w", lr.Namespace, lr.Name, err)
	}
	reportsSeen.WithLabelValues(label, "recorded").Inc()
	log.Info("a leaked key recorded", "hint", rep.Hint, "url", rep.URL, "reference", reference, "leakReport", lr.Name)
	return true, nil
}

// refuse answers a request that could not be read or verified, with secretscanning's status;
// its error names no token.
func (r *Receiver) refuse(w http.ResponseWriter, log logr.Logger, src string, err error) {
	status := secretscanning.HTTPStatus(err)
	requests.WithLabelValues(src, outcome(status)).Inc()
	if status >= http.StatusInternalServerError {
		log.Error(err, "a leak report could not be handled")
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
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "failed"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// truncate cuts s to the record's bound of its field, at a byte: the fields are for people.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
