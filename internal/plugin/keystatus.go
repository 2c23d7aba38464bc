package plugin

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

func newKeyStatusCommand(o *Options) *cobra.Command {
	return newKeyReportCommand(o, &cobra.Command{
		Use:   "status NAME",
		Short: "Show an API key's state: conditions, Events, its key's times, delivery, reveal and policy",
		Long: "Show everything about one APIKey, as `cmctl status certificate` does for a certificate: its\n" +
			"conditions with their reasons and messages, its recent Events, the current key (hint and\n" +
			"generation) with when it was issued, when it ends and when it is renewed, when it was last used,\n" +
			"its delivery Secret and whether that Secret exists, its one-time reveal, failed renewals, and\n" +
			"what it may do (rate limit, source ranges, audiences, credits), and for a key bound to workloads\n" +
			"its binding's mode, who presented it lately (bound or not) and its misuses. It never shows a key.\n" +
			"Parts you may not read (Events, the delivery Secret) say so and the rest is shown.",
		Example: "  kubectl switchboard key status ci -n demo\n" +
			"  kubectl switchboard key status ci -n demo -o yaml",
	}, func(ctx context.Context, c client.Client, key *switchboardv1alpha1.APIKey) (any, func() error, error) {
		now := o.Clock.Now()
		report := newKeyReport(key, now)
		report.Delivery = deliveryOf(ctx, c, key)
		report.Events, report.EventsError = eventsOf(ctx, c, key)
		return report, func() error { return printKeyReport(o.Out, report, now) }, nil
	})
}

// keyReporter gathers what a report on key shows: data for -o json or yaml, and text, which prints
// it for people.
type keyReporter func(ctx context.Context, c client.Client, key *switchboardv1alpha1.APIKey) (data any, text func() error, err error)

// newKeyReportCommand makes cmd a `key VERB NAME` that reports on the APIKey NAME, as `key status`
// and `key history` do; report gathers the report.
func newKeyReportCommand(o *Options, cmd *cobra.Command, report keyReporter) *cobra.Command {
	var output string
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	return nameCommand(cmd, func(ctx context.Context, name string) error {
		if err := checkOutput(output, "text", outputJSON, outputYAML); err != nil {
			return err
		}
		c, _, key, err := o.getKey(ctx, name)
		if err != nil {
			return err
		}
		data, text, err := report(ctx, c, key)
		if err != nil {
			return err
		}
		switch output {
		case outputJSON:
			return writeJSON(o.Out, data)
		case outputYAML:
			out, err := yaml.Marshal(data)
			if err != nil {
				return fmt.Errorf("writing YAML: %w", err)
			}
			_, err = o.Out.Write(out)
			return err
		}
		return text()
	})
}

// maxEventsShown bounds the Events listed: the most recent ones.
const maxEventsShown = 20

// keyReport is what `key status` shows, and its -o json|yaml shape.
type keyReport struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	Description string `json:"description,omitempty"`
	// State is the one word of `key list` (keyclient.State).
	State     string       `json:"state"`
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	RevokedAt *metav1.Time `json:"revokedAt,omitempty"`

	Key       keyReportKey       `json:"key"`
	Lifecycle keyReportLifecycle `json:"lifecycle"`
	Delivery  keyReportDelivery  `json:"delivery"`
	Reveal    keyReportReveal    `json:"reveal"`
	Policy    keyReportPolicy    `json:"policy"`
	// Binding is the key's binding to workloads and who presented it lately (nil: a bearer key
	// the server saw no presenter of).
	Binding    *keyReportBinding  `json:"binding,omitempty"`
	Conditions []metav1.Condition `json:"conditions"`
	Events     []keyReportEvent   `json:"events"`
	// EventsError says why the Events could not be read ("" when they were).
	EventsError string `json:"eventsError,omitempty"`
}

// keyReportKey is the current key, never the key itself.
type keyReportKey struct {
	Hint                  string       `json:"hint,omitempty"`
	Generation            int64        `json:"generation"`
	IssuedAt              *metav1.Time `json:"issuedAt,omitempty"`
	NotAfter              *metav1.Time `json:"notAfter,omitempty"`
	RenewalTime           *metav1.Time `json:"renewalTime,omitempty"`
	LastUsedAt            *metav1.Time `json:"lastUsedAt,omitempty"`
	RotatedAt             *metav1.Time `json:"rotatedAt,omitempty"`
	PreviousKeyValidUntil *metav1.Time `json:"previousKeyValidUntil,omitempty"`
	// PreviousKeyLastUsedAt is the last use of the previous key (generation - 1) during its
	// grace, as the API server recorded it (status.previousKeyUse); nil: none recorded.
	PreviousKeyLastUsedAt *metav1.Time `json:"previousKeyLastUsedAt,omitempty"`
	// GraceEvidence is what holds or ended the previous key's grace (spec.graceEndsWhenUnusedFor):
	// its last use and the pods that still hold it, as the GraceEvidence condition says.
	GraceEvidence         string `json:"graceEvidence,omitempty"`
	FailedRenewalAttempts int32  `json:"failedRenewalAttempts"`
	// RotationRequestedAt is a rotation requested and not carried out yet ("" when none).
	RotationRequestedAt string `json:"rotationRequestedAt,omitempty"`
}

// keyReportLifecycle is the spec's lifecycle, as written.
type keyReportLifecycle struct {
	Lifetime              string `json:"lifetime,omitempty"`
	RenewBefore           string `json:"renewBefore,omitempty"`
	RenewBeforePercentage *int32 `json:"renewBeforePercentage,omitempty"`
	// RenewalWindows are the spec's windows, each as "Monday,Friday 02:00+2h Europe/Paris" or
	// "cron 0 2 * * 1-5 +2h Europe/Paris".
	RenewalWindows      []string `json:"renewalWindows,omitempty"`
	RevokeWhenUnusedFor string   `json:"revokeWhenUnusedFor,omitempty"`
	// GraceEndsWhenUnusedFor is the quiet period after which an old key's grace ends early.
	GraceEndsWhenUnusedFor string `json:"graceEndsWhenUnusedFor,omitempty"`
}

// Delivery Secret states.
const (
	secretExists  = "Exists"
	secretMissing = "Missing"
	secretForeign = "NotThisAPIKeys"
	secretUnknown = "Unknown"
)

// keyReportDelivery is the delivery Secret (spec.secretName) and what is known of it.
type keyReportDelivery struct {
	SecretName string `json:"secretName,omitempty"`
	// Secret is Exists, Missing, NotThisAPIKeys (a Secret switchboard did not write for this
	// APIKey has the name) or Unknown (it could not be read: Message says why); empty without
	// a secretName.
	Secret string `json:"secret,omitempty"`
	// SecretGeneration is the key generation the Secret holds, from its label.
	SecretGeneration int64  `json:"secretGeneration,omitempty"`
	Message          string `json:"message,omitempty"`
}

// keyReportReveal is the one-time reveal of the current key.
type keyReportReveal struct {
	// State is Waiting, Claimable, Delivered, Claimed or Expired.
	State      string       `json:"state"`
	SecretName string       `json:"secretName,omitempty"`
	ExpiresAt  *metav1.Time `json:"expiresAt,omitempty"`
}

// keyReportPolicy is what the key may do.
type keyReportPolicy struct {
	RateLimit           string   `json:"rateLimit,omitempty"`
	AllowedSourceRanges []string `json:"allowedSourceRanges,omitempty"`
	Audiences           []string `json:"audiences,omitempty"`
	// CreditsPerPeriod is spec.credits.amount, and Credits the balance the API server last
	// wrote (status.credits, with lastUsedAt).
	CreditsPerPeriod int64                                    `json:"creditsPerPeriod,omitempty"`
	Credits          *switchboardv1alpha1.APIKeyCreditsStatus `json:"credits,omitempty"`
	// CreditPool is spec.creditPool: the APIKeyCreditPool whose credits the key spends with
	// others, whose balance Credits then is.
	CreditPool string `json:"creditPool,omitempty"`
}

// keyReportBinding is what spec.binding names and what the API server last wrote of who
// presented the key (status.binding), with the operator's last misuse event.
type keyReportBinding struct {
	// Mode is spec.binding.mode ("" when the binding was removed since the server counted).
	Mode            string   `json:"mode,omitempty"`
	Consumers       bool     `json:"consumers,omitempty"`
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	SPIFFEIDs       []string `json:"spiffeIDs,omitempty"`
	PublicKeys      []string `json:"publicKeys,omitempty"`
	// Presenters are who presented the key lately, the most recent first; Misuses counts the
	// requests that proved no bound workload, the last at LastMisuseAt; ObservedAt is when the
	// server counted (all nil or zero: no count written yet).
	Presenters   []switchboardv1alpha1.BindingPresenter `json:"presenters"`
	Misuses      int64                                  `json:"misuses"`
	LastMisuseAt *metav1.Time                           `json:"lastMisuseAt,omitempty"`
	ObservedAt   *metav1.Time                           `json:"observedAt,omitempty"`
	// MisuseReportedAt is when the operator last sent apikey.misused (status.misuseAlerts).
	MisuseReportedAt *metav1.Time `json:"misuseReportedAt,omitempty"`
}

// bindingOf is k's binding report, nil for a key without spec.binding or status.binding.
func bindingOf(k *switchboardv1alpha1.APIKey) *keyReportBinding {
	spec, st := k.Spec.Binding, k.Status.Binding
	if spec == nil && st == nil {
		return nil
	}
	b := &keyReportBinding{Presenters: []switchboardv1alpha1.BindingPresenter{}}
	if spec != nil {
		b.Mode, b.Consumers = string(spec.Mode), spec.Consumers
		b.ServiceAccounts, b.SPIFFEIDs, b.PublicKeys = spec.ServiceAccounts, spec.SPIFFEIDs, spec.PublicKeys
	}
	if st != nil {
		b.Presenters = append(b.Presenters, st.Presenters...)
		sort.SliceStable(b.Presenters, func(i, j int) bool { return b.Presenters[j].LastSeen.Before(&b.Presenters[i].LastSeen) })
		b.Misuses, b.LastMisuseAt, b.ObservedAt = st.Misuses, st.LastMisuseAt, st.ObservedAt.DeepCopy()
	}
	if a := k.Status.MisuseAlerts; a != nil {
		b.MisuseReportedAt = a.ReportedAt.DeepCopy()
	}
	return b
}

// keyReportEvent is one Event about the APIKey.
type keyReportEvent struct {
	Type      string      `json:"type"`
	Reason    string      `json:"reason"`
	Action    string      `json:"action,omitempty"`
	Message   string      `json:"message"`
	Count     int32       `json:"count"`
	FirstSeen metav1.Time `json:"firstSeen"`
	LastSeen  metav1.Time `json:"lastSeen"`
	From      string      `json:"from,omitempty"`
}

// newKeyReport is what the APIKey itself says; the delivery Secret and the Events are read
// apart (deliveryOf, eventsOf).
func newKeyReport(k *switchboardv1alpha1.APIKey, now time.Time) *keyReport {
	st := &k.Status
	state := keyclient.State(k, now)
	r := &keyReport{
		Name: k.Name, Namespace: k.Namespace, Description: k.Spec.Description,
		State:     string(state),
		CreatedAt: keyclient.CreatedAt(k), ExpiresAt: k.Spec.ExpiresAt, RevokedAt: st.RevokedAt,
		Key: keyReportKey{
			Hint: st.KeyHint, Generation: st.KeyGeneration,
			IssuedAt: st.KeyIssuedAt, NotAfter: st.KeyNotAfter, RenewalTime: st.RenewalTime,
			LastUsedAt: st.LastUsedAt, RotatedAt: st.RotatedAt, PreviousKeyValidUntil: st.PreviousKeyValidUntil,
			FailedRenewalAttempts: st.FailedRenewalAttempts,
		},
		Lifecycle: keyReportLifecycle{
			Lifetime: formatDuration(k.Spec.Lifetime), RenewBefore: formatDuration(k.Spec.RenewBefore),
			RenewBeforePercentage: k.Spec.RenewBeforePercentage, RevokeWhenUnusedFor: formatDuration(k.Spec.RevokeWhenUnusedFor),
			GraceEndsWhenUnusedFor: formatDuration(k.Spec.GraceEndsWhenUnusedFor),
		},
		Delivery: keyReportDelivery{SecretName: k.Spec.SecretName},
		Reveal:   revealOf(k, state),
		Policy: keyReportPolicy{
			RateLimit: keyclient.FormatRateLimit(k.Spec.RateLimit), Credits: st.Credits, CreditPool: k.Spec.CreditPool,
		},
		Binding:    bindingOf(k),
		Conditions: sortedConditions(k.Status.Conditions),
		Events:     []keyReportEvent{},
	}
	for _, w := range k.Spec.RenewalWindows {
		r.Lifecycle.RenewalWindows = append(r.Lifecycle.RenewalWindows, formatWindow(w))
	}
	for _, cidr := range k.Spec.AllowedSourceRanges {
		r.Policy.AllowedSourceRanges = append(r.Policy.AllowedSourceRanges, string(cidr))
	}
	for _, a := range k.Spec.Audiences {
		r.Policy.Audiences = append(r.Policy.Audiences, string(a))
	}
	if k.Spec.Credits != nil {
		r.Policy.CreditsPerPeriod = k.Spec.Credits.Amount
	}
	if u := st.PreviousKeyUse; u != nil && u.KeyGeneration == st.KeyGeneration-1 {
		r.Key.PreviousKeyLastUsedAt = u.LastUsedAt.DeepCopy()
	}
	if c := meta.FindStatusCondition(st.Conditions, switchboardv1alpha1.ConditionGraceEvidence); c != nil && st.PreviousKeyValidUntil != nil {
		r.Key.GraceEvidence = c.Message
	}
	if rot := k.Spec.Rotation; rot != nil && rot.RequestedAt != st.LastHandledRotationAt {
		r.Key.RotationRequestedAt = rot.RequestedAt
	}
	if r.Conditions == nil {
		r.Conditions = []metav1.Condition{}
	}
	return r
}

// conditionOrder puts the conditions a person reads first first; others follow by name.
var conditionOrder = map[string]int{
	switchboardv1alpha1.ConditionReady:        0,
	switchboardv1alpha1.ConditionExpiringSoon: 1,
	switchboardv1alpha1.ConditionUnused:       2,
	switchboardv1alpha1.ConditionRevealed:     3,
}

func sortedConditions(conds []metav1.Condition) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	rank := func(t string) int {
		if r, ok := conditionOrder[t]; ok {
			return r
		}
		return len(conditionOrder)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank(out[i].Type), rank(out[j].Type); ri != rj {
			return ri < rj
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// Reveal states.
const (
	revealWaiting   = "Waiting"
	revealClaimable = "Claimable"
	revealDelivered = "Delivered"
	revealClaimed   = "Claimed"
	revealExpired   = "Expired"
	revealNone      = "None"
)

func revealOf(k *switchboardv1alpha1.APIKey, state keyclient.KeyState) keyReportReveal {
	switch state {
	case keyclient.StateRevoked, keyclient.StateExpired, keyclient.StateDeleting:
		return keyReportReveal{State: revealNone}
	}
	switch keyclient.RevealStatus(k) {
	case keyclient.RevealClaimable:
		return keyReportReveal{State: revealClaimable, SecretName: k.Status.RevealSecretName, ExpiresAt: k.Status.RevealExpiresAt}
	case keyclient.RevealDelivered:
		return keyReportReveal{State: revealDelivered}
	case keyclient.RevealGone:
		if c := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed); c != nil && c.Reason == switchboardv1alpha1.ReasonRevealExpired {
			return keyReportReveal{State: revealExpired}
		}
		return keyReportReveal{State: revealClaimed}
	}
	return keyReportReveal{State: revealWaiting}
}

// deliveryOf reads the delivery Secret's metadata only (never its data, which holds the key):
// whether it exists and is this APIKey's.
func deliveryOf(ctx context.Context, c client.Client, k *switchboardv1alpha1.APIKey) keyReportDelivery {
	d := keyReportDelivery{SecretName: k.Spec.SecretName}
	if d.SecretName == "" {
		return d
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := c.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: d.SecretName}, secret)
	switch {
	case err == nil:
		l := secret.GetLabels()
		if l[keysecret.LabelAPIKeyUID] != string(k.UID) || l[keysecret.LabelComponent] != keysecret.ComponentDelivery {
			d.Secret, d.Message = secretForeign, "a Secret of that name exists that switchboard did not write for this APIKey: it will not be touched"
			return d
		}
		d.Secret, d.SecretGeneration = secretExists, keysecret.Generation(secret)
	case apierrors.IsNotFound(err):
		d.Secret, d.Message = secretMissing, "the operator issues a new key into it"
	default:
		d.Secret = secretUnknown
		d.Message = oneLine(explain(err, action{verb: "get", resource: "secrets", kind: "Secret", namespace: k.Namespace, name: d.SecretName}).Error())
	}
	return d
}

// eventsOf lists the Events about the APIKey, most recent last. The operator records them
// with the events.k8s.io/v1 API; the API server serves the same objects as core/v1 Events,
// which is what Kubernetes' built-in view, edit and admin roles let tenants read (and what
// kubectl describe reads), so they are read there, and through events.k8s.io/v1 only when
// core/v1 is refused.
func eventsOf(ctx context.Context, c client.Client, k *switchboardv1alpha1.APIKey) ([]keyReportEvent, string) {
	events, coreErr := coreEvents(ctx, c, k)
	if coreErr == nil {
		return events, ""
	}
	if !apierrors.IsForbidden(coreErr) {
		return []keyReportEvent{}, oneLine(explain(coreErr, action{verb: "list", resource: "events", kind: "Events", namespace: k.Namespace}).Error())
	}
	events, err := eventsAPIEvents(ctx, c, k)
	if err == nil {
		return events, ""
	}
	return []keyReportEvent{}, oneLine(explain(coreErr, action{verb: "list", resource: "events", kind: "Events", namespace: k.Namespace}).Error())
}

func coreEvents(ctx context.Context, c client.Client, k *switchboardv1alpha1.APIKey) ([]keyReportEvent, error) {
	return listEvents(ctx, c, k, &corev1.EventList{}, "involvedObject.uid", func(e *corev1.Event) keyReportEvent {
		ev := keyReportEvent{Type: e.Type, Reason: e.Reason, Action: e.Action, Message: e.Message, Count: e.Count,
			FirstSeen: e.FirstTimestamp, LastSeen: e.LastTimestamp, From: cmp.Or(e.ReportingController, e.Source.Component)}
		if e.Series != nil {
			ev.Count, ev.LastSeen = e.Series.Count, metav1.Time(e.Series.LastObservedTime)
		}
		return fillEventTimes(ev, e.EventTime, e.CreationTimestamp)
	})
}

func eventsAPIEvents(ctx context.Context, c client.Client, k *switchboardv1alpha1.APIKey) ([]keyReportEvent, error) {
	return listEvents(ctx, c, k, &eventsv1.EventList{}, "regarding.uid", func(e *eventsv1.Event) keyReportEvent {
		ev := keyReportEvent{Type: e.Type, Reason: e.Reason, Action: e.Action, Message: e.Note, Count: e.DeprecatedCount,
			FirstSeen: e.DeprecatedFirstTimestamp, LastSeen: e.DeprecatedLastTimestamp, From: e.ReportingController}
		if e.Series != nil {
			ev.Count, ev.LastSeen = e.Series.Count, metav1.Time(e.Series.LastObservedTime)
		}
		return fillEventTimes(ev, e.EventTime, e.CreationTimestamp)
	})
}

// listEvents lists into list the Events of one API about k, selected by the field that holds the
// uid of the object they are about, and reads each with event.
func listEvents[E k8sruntime.Object](ctx context.Context, c client.Client, k *switchboardv1alpha1.APIKey, list client.ObjectList, field string, event func(E) keyReportEvent) ([]keyReportEvent, error) {
	sel := fields.OneTermEqualSelector(field, string(k.UID))
	if err := c.List(ctx, list, client.InNamespace(k.Namespace), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	items, err := itemsOf[E](list)
	if err != nil {
		return nil, err
	}
	out := make([]keyReportEvent, 0, len(items))
	for _, item := range items {
		out = append(out, event(item))
	}
	return recentEvents(out), nil
}

// fillEventTimes completes an Event's times: an Event of the events.k8s.io API has an
// eventTime and, when repeated, a series, but no first and last timestamps.
func fillEventTimes(ev keyReportEvent, eventTime metav1.MicroTime, created metav1.Time) keyReportEvent {
	first := created
	if !eventTime.IsZero() {
		first = metav1.Time(eventTime)
	}
	if ev.FirstSeen.IsZero() {
		ev.FirstSeen = first
	}
	if ev.LastSeen.IsZero() {
		ev.LastSeen = ev.FirstSeen
	}
	if ev.Count < 1 {
		ev.Count = 1
	}
	return ev
}

// recentEvents sorts Events oldest first and keeps the most recent maxEventsShown.
func recentEvents(events []keyReportEvent) []keyReportEvent {
	sort.SliceStable(events, func(i, j int) bool { return events[i].LastSeen.Before(&events[j].LastSeen) })
	if len(events) > maxEventsShown {
		events = events[len(events)-maxEventsShown:]
	}
	return events
}
