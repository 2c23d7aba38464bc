package leakreceiver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver/secretscanning"
)

// The results of an alert, in the webhook's answer.
const (
	resultRecorded      = "recorded"
	resultFalsePositive = "false_positive"
)

// knowledge is what the receiver knows of a reported key before any call.
type knowledge int

const (
	// knownNot: not a key issued here (a false positive).
	knownNot knowledge = iota
	// knownIssued: issued here, and not known to be recorded: a LeakReport is to be created.
	knownIssued
	// knownRecorded: recorded already, by the index's word (its hash Secret records the leak:
	// the operator acted on the record).
	knownRecorded
	// knownRemembered: recorded already, by this replica's memory of what it recorded.
	knownRemembered
)

// known says, without a call, what rep's key is: remembered as recorded, recorded by the
// operator's word, issued, or none of these.
func (r *Receiver) known(log logr.Logger, label string, rep secretscanning.Report, now time.Time) knowledge {
	if r.replays.key(rep.Hash, now) {
		reportsSeen.WithLabelValues(label, "already_recorded").Inc()
		return knownRemembered
	}
	if _, res := r.cfg.Index.Lookup(&rep.Hash, now); res != keyindex.Unknown {
		return knownIssued
	}
	if r.cfg.Index.Leaked(&rep.Hash) {
		reportsSeen.WithLabelValues(label, "already_recorded").Inc()
		log.Info("a leaked key reported again, already acted on", "hint", rep.Hint, "url", rep.URL)
		r.replays.rememberKey(rep.Hash, now)
		return knownRecorded
	}
	reportsSeen.WithLabelValues(label, "not_issued").Inc()
	log.V(1).Info("a leak report of a key not issued here", "hint", rep.Hint)
	return knownNot
}

// handleAlert records the token of alert id, if its key was issued here and is not recorded
// yet, remembers what was done, and says it: recorded (now or before) or false_positive.
func (r *Receiver) handleAlert(ctx context.Context, log logr.Logger, label string, rep secretscanning.Report, id string) (string, error) {
	now := r.cfg.Clock.Now()
	result := resultFalsePositive
	if !rep.Candidate() {
		reportsSeen.WithLabelValues(label, "false_positive").Inc()
	} else {
		switch r.known(log, label, rep, now) {
		case knownNot:
		case knownRecorded, knownRemembered:
			result = resultRecorded
		case knownIssued:
			if err := r.record(ctx, log, label, switchboardv1alpha1.LeakSourceGitHubAlert, rep, id); err != nil {
				return "", err
			}
			r.replays.rememberKey(rep.Hash, now)
			result = resultRecorded
		}
	}
	r.replays.rememberAlert(id, result, now)
	return result, nil
}

// record creates rep's LeakReport (source src; label names the way it came for the metrics).
// A record that exists already (AlreadyExists: the same key reported before, by either way,
// or by another replica) is the same leak, recorded.
func (r *Receiver) record(ctx context.Context, log logr.Logger, label, src string, rep secretscanning.Report, reference string) error {
	now := r.cfg.Clock.Now()
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
		return nil
	case err != nil:
		return fmt.Errorf("creating LeakReport %s/%s: %w", lr.Namespace, lr.Name, err)
	}
	reportsSeen.WithLabelValues(label, "recorded").Inc()
	log.Info("a leaked key recorded", "hint", rep.Hint, "url", rep.URL, "reference", reference, "leakReport", lr.Name)
	return nil
}

// alertAnswer is the webhook's answer, shown in GitHub's log of deliveries.
type alertAnswer struct {
	Result string `json:"result"`
	Alert  string `json:"alert,omitempty"`
	Detail string `json:"detail,omitempty"`
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
