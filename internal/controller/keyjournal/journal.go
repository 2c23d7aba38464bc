// Package keyjournal records a key's events durably, in the system namespace, before the
// status that publishes them is written: each event in the key's APIKeyHistory (and its
// read-only copy for the tenant), and, for each KeyWebhook of the key's namespace that
// subscribes to it, a message in the namespace's WebhookOutbox, which the sender delivers.
//
// Recording is idempotent by event id (derived from the APIKey's UID, the event type and the
// key generation: EventID), so the reconciler can record again after a crash, and a message
// already delivered is at worst delivered again with the same webhook-id. The outbox is
// written before the history: an event in the history has its messages in the outbox (or
// already delivered), so the history is what says an event was recorded.
package keyjournal

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// Event is one key event to record: its id (EventID) and its payload. Its Data.Reason is the
// history's message.
type Event struct {
	ID string
	webhookdelivery.Event
}

// idEncoding spells ids in lower-case letters and digits.
var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// digest is the first 20 bytes of the SHA-256 of parts joined by "/", spelled in base32 (32
// characters): the same parts, the same id, after any crash.
func digest(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "/")))
	return strings.ToLower(idEncoding.EncodeToString(sum[:20]))
}

// EventID is the id of the event of type t that happened to key generation gen of the APIKey
// of UID uid: computed again after a crash, the same transition is the same event.
func EventID(uid types.UID, t webhookdelivery.EventType, gen int64) string {
	return "evt_" + digest(string(uid), string(t), strconv.FormatInt(gen, 10))
}

// PeriodEventID is the id of the credit event of type t for the credits period period of the
// APIKey of UID uid, at threshold percent (0 but for apikey.credits_low): once per period and
// threshold, whichever key generation is current.
func PeriodEventID(uid types.UID, t webhookdelivery.EventType, period string, percent int) string {
	return "evt_" + digest(string(uid), string(t), "period", period, strconv.Itoa(percent))
}

// MisuseEventID is the id of the apikey.misused event of the APIKey of UID uid that reports the
// misuses up to the one seen at lastMisuseAt (status.binding): the same misuses, the same event.
func MisuseEventID(uid types.UID, lastMisuseAt time.Time) string {
	return "evt_" + digest(string(uid), string(webhookdelivery.KeyMisused), "misuse", lastMisuseAt.UTC().Format(time.RFC3339Nano))
}

// MessageID is the webhook-id of event eventID's delivery to the KeyWebhook of UID webhook:
// one per event and endpoint, the same on every attempt and after any crash.
func MessageID(webhook types.UID, eventID string) string {
	return "msg_" + digest(string(webhook), eventID)
}

// Metrics: what was recorded, and what a full outbox dropped.
var (
	eventsRecorded   = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_operator_key_events_total", Help: "Key events recorded in a key's history (each once, however often it was computed), by type."}, []string{"type"})
	outboxDropped    = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_operator_webhook_outbox_dropped_total", Help: "Webhook messages dropped, undelivered, because their namespace's outbox was full (the oldest go first)."})
	eventsUnsendable = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_operator_key_events_unsendable_total", Help: "Key events kept in the history but sent to no webhook because their payload broke its schema (a leak report without a URL), by type."}, []string{"type"})
)

// Every type is counted from zero, so rate() sees the first event.
func init() {
	for _, t := range webhookdelivery.EventTypes {
		eventsRecorded.WithLabelValues(string(t))
		eventsUnsendable.WithLabelValues(string(t))
	}
}

// Journal records key events. It is stateless: the records are the state.
type Journal struct {
	// Client reads KeyWebhooks from the operator's cache and writes the records.
	Client client.Client
	// APIReader reads the records from the API server: the sender updates the same outbox, and
	// a cache behind it would only cost conflicts.
	APIReader client.Reader
	// SystemNamespace holds the outboxes and histories.
	SystemNamespace string
}

// Record records events of key: the outbox messages of the KeyWebhooks that subscribe to them,
// then the history, then the tenant's copy of the history. It does nothing without events. An
// error means some may not be recorded: the caller records them again (the same ids) before it
// publishes them.
func (j *Journal) Record(ctx context.Context, key *switchboardv1alpha1.APIKey, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	history, err := j.history(ctx, key.UID)
	if err != nil {
		return err
	}
	var fresh []Event
	for _, e := range events {
		if history == nil || !slices.ContainsFunc(history.Spec.Events, func(h switchboardv1alpha1.KeyHistoryEvent) bool { return h.ID == e.ID }) {
			fresh = append(fresh, e)
		}
	}
	if err := j.enqueue(ctx, key.Namespace, fresh); err != nil {
		return err
	}
	record, err := j.appendHistory(ctx, key, fresh)
	if err != nil {
		return err
	}
	return j.copyHistory(ctx, key, record)
}

// history reads the key's history in the system namespace (nil: none yet).
func (j *Journal) history(ctx context.Context, uid types.UID) (*switchboardv1alpha1.APIKeyHistory, error) {
	h := &switchboardv1alpha1.APIKeyHistory{}
	err := j.APIReader.Get(ctx, client.ObjectKey{Namespace: j.SystemNamespace, Name: switchboardv1alpha1.APIKeyHistoryName(string(uid))}, h)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the key's history %s/%s: %w", j.SystemNamespace, switchboardv1alpha1.APIKeyHistoryName(string(uid)), err)
	}
	return h, nil
}

// messagesFor are the outbox messages of events for the KeyWebhooks hooks: one per event and
// subscribed webhook, in the events' order. An event whose payload breaks its schema is sent
// to none (unsendable names them).
func messagesFor(hooks []switchboardv1alpha1.KeyWebhook, events []Event) (msgs []switchboardv1alpha1.WebhookMessage, unsendable []Event) {
	for _, e := range events {
		var body []byte
		for i := range hooks {
			h := &hooks[i]
			if !subscribes(h, e.Type) {
				continue
			}
			id := MessageID(h.UID, e.ID)
			if body == nil {
				m, err := webhookdelivery.NewMessage(id, e.Event)
				if err != nil || len(m.Body) > switchboardv1alpha1.MaxOutboxBodyBytes {
					unsendable = append(unsendable, e)
					break
				}
				body = m.Body
			}
			msgs = append(msgs, switchboardv1alpha1.WebhookMessage{
				ID: id, WebhookName: h.Name, WebhookUID: string(h.UID), Type: switchboardv1alpha1.KeyEventType(e.Type), Body: string(body),
			})
		}
	}
	return msgs, unsendable
}

// subscribes says whether h asks for events of type t: all when it names none.
func subscribes(h *switchboardv1alpha1.KeyWebhook, t webhookdelivery.EventType) bool {
	return len(h.Spec.EventTypes) == 0 || slices.Contains(h.Spec.EventTypes, switchboardv1alpha1.KeyEventType(t))
}

// enqueue appends the messages of events to namespace's outbox, creating it if needed.
func (j *Journal) enqueue(ctx context.Context, namespace string, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	var hooks switchboardv1alpha1.KeyWebhookList
	if err := j.Client.List(ctx, &hooks, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing the KeyWebhooks of namespace %s: %w", namespace, err)
	}
	// In the order of their names, whatever order the cache lists them in.
	slices.SortFunc(hooks.Items, func(a, b switchboardv1alpha1.KeyWebhook) int { return strings.Compare(a.Name, b.Name) })
	msgs, unsendable := messagesFor(hooks.Items, events)
	for _, e := range unsendable {
		eventsUnsendable.WithLabelValues(string(e.Type)).Inc()
		log.FromContext(ctx).Error(errors.New("the event's payload breaks its schema"), "a key event is kept in the history but sent to no webhook", "type", e.Type, "eventID", e.ID)
	}
	if len(msgs) == 0 {
		return nil
	}
	name := switchboardv1alpha1.WebhookOutboxName(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		box := &switchboardv1alpha1.WebhookOutbox{}
		err := j.APIReader.Get(ctx, client.ObjectKey{Namespace: j.SystemNamespace, Name: name}, box)
		if apierrors.IsNotFound(err) {
			box = &switchboardv1alpha1.WebhookOutbox{
				ObjectMeta: metav1.ObjectMeta{Namespace: j.SystemNamespace, Name: name},
				Spec:       switchboardv1alpha1.WebhookOutboxSpec{Namespace: namespace},
			}
			_, dropped := appendMessages(&box.Spec, msgs)
			if err := j.Client.Create(ctx, box); err != nil {
				if apierrors.IsAlreadyExists(err) {
					// Created by the sender or another replica meanwhile: read it and try again.
					return apierrors.NewConflict(switchboardv1alpha1.GroupVersion.WithResource("webhookoutboxes").GroupResource(), name, err)
				}
				return err
			}
			outboxDropped.Add(float64(dropped))
			return nil
		}
		if err != nil {
			return err
		}
		added, dropped := appendMessages(&box.Spec, msgs)
		if added == 0 {
			return nil
		}
		if err := j.Client.Update(ctx, box); err != nil {
			return err
		}
		outboxDropped.Add(float64(dropped))
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording %d webhook messages in outbox %s/%s: %w", len(msgs), j.SystemNamespace, name, err)
	}
	return nil
}

// appendMessages appends to spec the messages it does not hold yet (by id), then drops the
// oldest beyond MaxOutboxMessages, counting them in spec.dropped and in the endpoint state of
// the KeyWebhook each was for. It says how many it added and dropped.
func appendMessages(spec *switchboardv1alpha1.WebhookOutboxSpec, msgs []switchboardv1alpha1.WebhookMessage) (added, dropped int) {
	for _, m := range msgs {
		if !slices.ContainsFunc(spec.Messages, func(o switchboardv1alpha1.WebhookMessage) bool { return o.ID == m.ID }) {
			spec.Messages = append(spec.Messages, m)
			added++
		}
	}
	over := len(spec.Messages) - switchboardv1alpha1.MaxOutboxMessages
	if over <= 0 {
		return added, 0
	}
	for _, m := range spec.Messages[:over] {
		countDropped(spec, m.WebhookUID)
	}
	spec.Messages = slices.Clone(spec.Messages[over:])
	spec.Dropped += int64(over)
	return added, over
}

// maxEndpoints is the bound of spec.endpoints (its MaxItems).
const maxEndpoints = 64

// countDropped counts one dropped message in the endpoint state of the KeyWebhook of UID uid,
// added if there is room for it.
func countDropped(spec *switchboardv1alpha1.WebhookOutboxSpec, uid string) {
	for i := range spec.Endpoints {
		if spec.Endpoints[i].WebhookUID == uid {
			spec.Endpoints[i].Dropped++
			return
		}
	}
	if len(spec.Endpoints) < maxEndpoints {
		spec.Endpoints = append(spec.Endpoints, switchboardv1alpha1.WebhookEndpointState{WebhookUID: uid, Dropped: 1})
	}
}

// historyEvent is e as the history keeps it.
func historyEvent(e Event) switchboardv1alpha1.KeyHistoryEvent {
	return switchboardv1alpha1.KeyHistoryEvent{
		ID: e.ID, Type: switchboardv1alpha1.KeyEventType(e.Type), Time: metav1.NewTime(e.Timestamp),
		KeyGeneration: e.Data.KeyGeneration, KeyHint: e.Data.KeyHint, Message: truncate(e.Data.Reason, maxMessageChars),
	}
}

// maxMessageChars is the bound of a history event's message (its MaxLength).
const maxMessageChars = 2048

// truncate cuts s to at most n characters.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// appendEvents appends to spec the events it does not hold yet (by id), then drops the oldest
// beyond MaxHistoryEvents, counting them in spec.dropped. It says which it added.
func appendEvents(spec *switchboardv1alpha1.APIKeyHistorySpec, events []Event) (added []Event) {
	for _, e := range events {
		if !slices.ContainsFunc(spec.Events, func(h switchboardv1alpha1.KeyHistoryEvent) bool { return h.ID == e.ID }) {
			spec.Events = append(spec.Events, historyEvent(e))
			added = append(added, e)
		}
	}
	if over := len(spec.Events) - switchboardv1alpha1.MaxHistoryEvents; over > 0 {
		spec.Events = slices.Clone(spec.Events[over:])
		spec.Dropped += int64(over)
	}
	return added
}

// appendHistory appends events to the key's history in the system namespace, creating it if
// needed, and returns the history as stored.
func (j *Journal) appendHistory(ctx context.Context, key *switchboardv1alpha1.APIKey, events []Event) (*switchboardv1alpha1.APIKeyHistory, error) {
	name := switchboardv1alpha1.APIKeyHistoryName(string(key.UID))
	var stored *switchboardv1alpha1.APIKeyHistory
	var added []Event
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		h, err := j.history(ctx, key.UID)
		if err != nil {
			return err
		}
		if h == nil {
			h = &switchboardv1alpha1.APIKeyHistory{
				ObjectMeta: metav1.ObjectMeta{Namespace: j.SystemNamespace, Name: name},
				Spec: switchboardv1alpha1.APIKeyHistorySpec{APIKey: switchboardv1alpha1.LeakedKeyReference{
					Namespace: key.Namespace, Name: key.Name, UID: string(key.UID)}},
			}
			added = appendEvents(&h.Spec, events)
			if err := j.Client.Create(ctx, h); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(switchboardv1alpha1.GroupVersion.WithResource("apikeyhistories").GroupResource(), name, err)
				}
				return err
			}
			stored = h
			return nil
		}
		if added = appendEvents(&h.Spec, events); len(added) > 0 {
			if err := j.Client.Update(ctx, h); err != nil {
				return err
			}
		}
		stored = h
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recording %d events in the key's history %s/%s: %w", len(events), j.SystemNamespace, name, err)
	}
	for _, e := range added {
		eventsRecorded.WithLabelValues(string(e.Type)).Inc()
	}
	return stored, nil
}

// copyHistory writes record's spec to the tenant's read-only copy: an APIKeyHistory named after
// the APIKey in its namespace, controlled by it (so it goes with it). Nothing is decided from
// the copy; it only lets tenants, who cannot read the system namespace, see their key's life.
func (j *Journal) copyHistory(ctx context.Context, key *switchboardv1alpha1.APIKey, record *switchboardv1alpha1.APIKeyHistory) error {
	owner := metav1.OwnerReference{
		APIVersion: switchboardv1alpha1.GroupVersion.String(), Kind: "APIKey", Name: key.Name, UID: key.UID,
		Controller: ptrTo(true),
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cp := &switchboardv1alpha1.APIKeyHistory{}
		err := j.APIReader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, cp)
		if apierrors.IsNotFound(err) {
			cp = &switchboardv1alpha1.APIKeyHistory{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: []metav1.OwnerReference{owner}},
				Spec:       *record.Spec.DeepCopy(),
			}
			return j.Client.Create(ctx, cp)
		}
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(cp.Spec, record.Spec) && equality.Semantic.DeepEqual(cp.OwnerReferences, []metav1.OwnerReference{owner}) {
			return nil
		}
		cp.Spec = *record.Spec.DeepCopy()
		cp.OwnerReferences = []metav1.OwnerReference{owner}
		return j.Client.Update(ctx, cp)
	})
	if err != nil {
		return fmt.Errorf("copying the key's history to %s/%s: %w", key.Namespace, key.Name, err)
	}
	return nil
}

// Delete deletes the history of the APIKey of UID uid from the system namespace (its copy goes
// with the APIKey, which owns it).
func (j *Journal) Delete(ctx context.Context, uid types.UID) error {
	h := &switchboardv1alpha1.APIKeyHistory{ObjectMeta: metav1.ObjectMeta{Namespace: j.SystemNamespace, Name: switchboardv1alpha1.APIKeyHistoryName(string(uid))}}
	if err := j.Client.Delete(ctx, h); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the key's history %s/%s: %w", h.Namespace, h.Name, err)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
