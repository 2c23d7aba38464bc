package webhooksender

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// The pure part of the sender: which messages to attempt now, in what order, and what an
// attempt's result does to an outbox. The dispatcher (dispatcher.go) does the I/O.

// candidate is a message that may be attempted: due, its endpoint free.
type candidate struct {
	namespace string // the tenant namespace (the outbox's spec.namespace)
	outbox    string // the outbox's name
	message   switchboardv1alpha1.WebhookMessage
}

// dueMessages returns, per namespace (of outboxes named after it, as the operator names them), the oldest due message of each endpoint that busy does
// not hold, in outbox order, and the earliest time a message not yet due falls due (zero when
// none). skip says which messages the cache shows out of date (written but not yet seen).
func dueMessages(outboxes []switchboardv1alpha1.WebhookOutbox, now time.Time, busy func(uid string) bool,
	skip func(outbox string, m *switchboardv1alpha1.WebhookMessage) bool) (map[string][]candidate, time.Time) {
	due := map[string][]candidate{}
	var next time.Time
	for i := range outboxes {
		ob := &outboxes[i]
		if ob.Name != switchboardv1alpha1.WebhookOutboxName(ob.Spec.Namespace) {
			continue // not one the operator writes: its messages name no namespace it may vouch for
		}
		taken := map[string]bool{}
		for _, m := range ob.Spec.Messages {
			if taken[m.WebhookUID] || busy(m.WebhookUID) {
				continue
			}
			taken[m.WebhookUID] = true // one at a time per endpoint, oldest first
			if skip(ob.Name, &m) {
				continue
			}
			if at := m.NextAttemptTime; at != nil && at.After(now) {
				if next.IsZero() || at.Time.Before(next) {
					next = at.Time
				}
				continue
			}
			due[ob.Spec.Namespace] = append(due[ob.Spec.Namespace], candidate{namespace: ob.Spec.Namespace, outbox: ob.Name, message: m})
		}
	}
	return due, next
}

// roundRobin picks up to free candidates, one per namespace in turn starting after the
// namespace last served (after), never more than room(namespace) for one namespace, and
// returns them with the last namespace it served.
func roundRobin(due map[string][]candidate, free int, room func(namespace string) int, after string) ([]candidate, string) {
	namespaces := make([]string, 0, len(due))
	for ns := range due {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	// Start with the first namespace past the one served last.
	start, _ := slices.BinarySearch(namespaces, after)
	if start < len(namespaces) && namespaces[start] == after {
		start++
	}
	namespaces = append(namespaces[start:], namespaces[:start]...)
	taken := map[string]int{}
	var picked []candidate
	last := after
	for progress := true; progress && len(picked) < free; {
		progress = false
		for _, ns := range namespaces {
			if len(picked) >= free {
				break
			}
			i := taken[ns]
			if i >= len(due[ns]) || i >= room(ns) {
				continue
			}
			picked = append(picked, due[ns][i])
			taken[ns] = i + 1
			last = ns
			progress = true
		}
	}
	return picked, last
}

// outcome is what an attempt did, as the outbox records it.
type outcome struct {
	// result is Send's, when an attempt was made.
	result webhookdelivery.Result
	// drop removes the message without an attempt: its KeyWebhook is gone (another UID), or
	// the endpoint is disabled.
	drop bool
	// count counts a dropped message in the endpoint's dropped.
	count bool
	// generation is the KeyWebhook's, which a Disable records.
	generation int64
	// err is why the attempt failed, for lastError.
	err string
}

// apply records what an attempt at message id of endpoint uid did in spec, at now, and says
// which messages it removed. A message no longer there (dropped by the operator meanwhile)
// changes only the endpoint's state.
func apply(spec *switchboardv1alpha1.WebhookOutboxSpec, uid, id string, o outcome, now time.Time) (removed []string) {
	st := endpointState(spec, uid)
	at := metav1.NewTime(now)
	remove := func(match func(m *switchboardv1alpha1.WebhookMessage) bool) {
		spec.Messages = slices.DeleteFunc(spec.Messages, func(m switchboardv1alpha1.WebhookMessage) bool {
			if match(&m) {
				removed = append(removed, m.ID)
				return true
			}
			return false
		})
	}
	this := func(m *switchboardv1alpha1.WebhookMessage) bool { return m.ID == id && m.WebhookUID == uid }
	if o.drop {
		remove(this)
		if o.count {
			st.Dropped += int64(len(removed))
		}
		return removed
	}
	switch o.result.Outcome {
	case webhookdelivery.Delivered:
		remove(this)
		st.LastDeliveryTime = &at
		st.LastError = ""
		st.DisabledGeneration = 0
	case webhookdelivery.Retry:
		for i := range spec.Messages {
			if m := &spec.Messages[i]; this(m) {
				m.Attempts++
				// The API keeps whole seconds: rounded up, never before its time.
				next := metav1.NewTime(ceilSecond(o.result.RetryAt))
				m.NextAttemptTime = &next
			}
		}
		st.LastError = o.err
	case webhookdelivery.Disable:
		// Every message of the endpoint goes: it asked for no more.
		remove(func(m *switchboardv1alpha1.WebhookMessage) bool { return m.WebhookUID == uid })
		st.Dropped += int64(len(removed))
		st.DisabledGeneration = o.generation
		st.LastError = o.err
	case webhookdelivery.GiveUp:
		remove(this)
		st.Dropped += int64(len(removed))
		st.LastError = o.err
	}
	return removed
}

// endpointState returns the state of endpoint uid in spec, added when missing; the states of
// endpoints with no message and nothing to remember make room when the list is full.
func endpointState(spec *switchboardv1alpha1.WebhookOutboxSpec, uid string) *switchboardv1alpha1.WebhookEndpointState {
	for i := range spec.Endpoints {
		if spec.Endpoints[i].WebhookUID == uid {
			return &spec.Endpoints[i]
		}
	}
	const maxEndpoints = 64 // the CRD's bound
	if len(spec.Endpoints) >= maxEndpoints {
		pending := map[string]bool{}
		for _, m := range spec.Messages {
			pending[m.WebhookUID] = true
		}
		// Forget first the endpoints that are idle and not disabled, then any idle one.
		for _, keepDisabled := range []bool{true, false} {
			over := len(spec.Endpoints) - maxEndpoints + 1
			spec.Endpoints = slices.DeleteFunc(spec.Endpoints, func(e switchboardv1alpha1.WebhookEndpointState) bool {
				if over <= 0 || pending[e.WebhookUID] || (keepDisabled && e.DisabledGeneration != 0) {
					return false
				}
				over--
				return true
			})
		}
	}
	spec.Endpoints = append(spec.Endpoints, switchboardv1alpha1.WebhookEndpointState{WebhookUID: uid})
	return &spec.Endpoints[len(spec.Endpoints)-1]
}

// findState returns the state of endpoint uid in spec, nil when it has none.
func findState(spec *switchboardv1alpha1.WebhookOutboxSpec, uid string) *switchboardv1alpha1.WebhookEndpointState {
	for i := range spec.Endpoints {
		if spec.Endpoints[i].WebhookUID == uid {
			return &spec.Endpoints[i]
		}
	}
	return nil
}

// ceilSecond is t rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}
