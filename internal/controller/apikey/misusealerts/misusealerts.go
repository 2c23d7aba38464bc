// Package misusealerts tells a platform that a bound key is presented by workloads its binding
// does not name, a concern of the APIKey controller: the Warning Event KeyMisused and the key
// event apikey.misused, at most once per key an Interval, each counting the misuses since the
// previous one.
//
// It decides from two things switchboard wrote: status.binding, who presented the key as the
// API server counted it (misuses and lastMisuseAt, written with lastUsedAt, so the events are
// as fresh as that write), and status.misuseAlerts, the operator's record of the last event
// (the misuses it counted up to, the last misuse it covered, when it was sent), which the API
// server may not write (the server status policy). Next is the record after seeing a status,
// Alert the event the change of record tells; both are pure, so a reconcile that lost its
// status patch computes the same event again (the same id, from the last misuse it covers: the
// journal records it once) and an operator restart sends nothing twice.
package misusealerts

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Interval is the least time between two misuse events of a key: a key presented without
// proof a thousand times a minute says so once in ten minutes, with the count.
const Interval = 10 * time.Minute

// Settle is how long a misuse may take to reach status.binding: the server writes it at most
// once a minute per key (with lastUsedAt), and the clocks may differ a little. The operator
// looks again Settle after an interval ends, for the misuses of its last minutes.
const Settle = 2 * time.Minute

// ReasonKeyMisused is the reason of the Warning Event.
const ReasonKeyMisused = "KeyMisused"

// Pending says whether b counts a misuse rec has not reported: one seen after the last that rec
// covers (any, without a record).
func Pending(rec *switchboardv1alpha1.APIKeyMisuseAlerts, b *switchboardv1alpha1.APIKeyBindingStatus) bool {
	if b == nil || b.LastMisuseAt == nil || b.LastMisuseAt.IsZero() {
		return false
	}
	return rec == nil || b.LastMisuseAt.After(rec.LastMisuseAt.Time)
}

// Next is the record after seeing b at now, with rec the record so far (nil: none): a record of
// an event sent now when b counts a misuse rec has not reported and the Interval after rec's
// event has passed; rec otherwise (nothing new, or the interval not over: WakeAt says when to
// look again).
func Next(rec *switchboardv1alpha1.APIKeyMisuseAlerts, b *switchboardv1alpha1.APIKeyBindingStatus, now time.Time) *switchboardv1alpha1.APIKeyMisuseAlerts {
	if !Pending(rec, b) || rec != nil && now.Before(rec.ReportedAt.Add(Interval)) {
		return rec
	}
	return &switchboardv1alpha1.APIKeyMisuseAlerts{
		ReportedMisuses: b.Misuses, LastMisuseAt: *b.LastMisuseAt.DeepCopy(), ReportedAt: metav1.NewTime(now.UTC().Truncate(time.Second)),
	}
}

// WakeAt is when the operator should look at the key again for misuses rec's interval held
// back: Settle after the interval ends (zero without a record).
func WakeAt(rec *switchboardv1alpha1.APIKeyMisuseAlerts) time.Time {
	if rec == nil {
		return time.Time{}
	}
	return rec.ReportedAt.Add(Interval + Settle)
}

// Due says whether a write of b may change rec: whether an APIKey whose status.binding changed
// needs a reconcile. The server rewrites status.binding at every write; only one that carries a
// misuse not reported, seen once rec's interval is over, needs the operator. The misuses of the
// interval reach the status within a minute of being seen, before the wake at WakeAt, which
// reports them.
func Due(rec *switchboardv1alpha1.APIKeyMisuseAlerts, b *switchboardv1alpha1.APIKeyBindingStatus) bool {
	return Pending(rec, b) && (rec == nil || !b.LastMisuseAt.Time.Before(rec.ReportedAt.Add(Interval)))
}

// Counted is how many misuses b counts since rec's event: all of them without a record; when
// the count went down (the server replica that counted restarted, or another one wrote) the
// count of b alone; at least 1, b having seen a misuse after rec's.
func Counted(rec *switchboardv1alpha1.APIKeyMisuseAlerts, b *switchboardv1alpha1.APIKeyBindingStatus) int64 {
	n := b.Misuses
	if rec != nil && b.Misuses >= rec.ReportedMisuses {
		n = b.Misuses - rec.ReportedMisuses
	}
	return max(n, 1)
}

// Alert is the misuse event due: when the last misuse was seen, what it reports and what it
// says in words.
type Alert struct {
	At      time.Time
	Data    webhookdelivery.MisuseData
	Message string
}

// Alerts are the events the record's change from before to after tells, b being the status
// after was made from: one when after is a new record (none otherwise). mode is the binding's
// mode as the operator recorded it for the server, hint the key's status.keyHint.
func Alerts(before, after *switchboardv1alpha1.APIKeyMisuseAlerts, b *switchboardv1alpha1.APIKeyBindingStatus, mode switchboardv1alpha1.BindingMode, hint string) []Alert {
	if after == nil || b == nil || b.LastMisuseAt == nil || !b.LastMisuseAt.Equal(&after.LastMisuseAt) ||
		before != nil && before.ReportedAt.Equal(&after.ReportedAt) && before.LastMisuseAt.Equal(&after.LastMisuseAt) {
		return nil // no new record (before is a copy of the status before: compared, not its address)
	}
	if mode == "" {
		mode = switchboardv1alpha1.BindingReportOnly
	}
	data := webhookdelivery.MisuseData{Mode: string(mode), Misuses: Counted(before, b), LastMisuseAt: b.LastMisuseAt.UTC(), Presenters: unbound(b)}
	if before != nil {
		data.PreviousReportAt = new(before.ReportedAt.UTC())
	}
	effect := "admitted: ReportOnly"
	if mode == switchboardv1alpha1.BindingEnforce {
		effect = "refused: Enforce"
	}
	times := "times"
	if data.Misuses == 1 {
		times = "time"
	}
	last := "no presenter recorded"
	if len(data.Presenters) > 0 {
		p := data.Presenters[0]
		who, from := p.Principal, p.Address
		if who == "" {
			who = "no proof"
		}
		if from == "" {
			from = "an unknown address"
		}
		last = fmt.Sprintf("last by %s from %s", who, from)
	}
	return []Alert{{At: data.LastMisuseAt, Data: data, Message: fmt.Sprintf(
		"key %s was presented %d %s by workloads its binding does not name (%s), %s", hint, data.Misuses, times, effect, last)}}
}

// ModeOf is the mode of key's binding the events report: the one the operator recorded for the
// server in hash Secret hash (what the server applied), else spec.binding's (the record not
// written yet), else ReportOnly. It is reported, never decided from.
func ModeOf(key *switchboardv1alpha1.APIKey, hash *corev1.Secret) switchboardv1alpha1.BindingMode {
	if hash != nil {
		if raw := hash.Data[keysecret.DataBinding]; len(raw) > 0 {
			if b, err := keysecret.ParseBinding(raw); err == nil {
				return b.Mode
			}
		}
	}
	if key != nil && key.Spec.Binding != nil && key.Spec.Binding.Mode != "" {
		return key.Spec.Binding.Mode
	}
	return switchboardv1alpha1.BindingReportOnly
}

// unbound are b's presenters the binding does not name, the most recent first.
func unbound(b *switchboardv1alpha1.APIKeyBindingStatus) []webhookdelivery.MisusePresenter {
	var out []webhookdelivery.MisusePresenter
	for _, p := range b.Presenters {
		if !p.Bound {
			out = append(out, webhookdelivery.MisusePresenter{Principal: p.Principal, Address: p.Address, Requests: p.Requests, LastSeen: p.LastSeen.UTC()})
		}
	}
	slices.SortStableFunc(out, func(x, y webhookdelivery.MisusePresenter) int { return y.LastSeen.Compare(x.LastSeen) })
	return out[:min(len(out), switchboardv1alpha1.MaxBindingPresenters)]
}
