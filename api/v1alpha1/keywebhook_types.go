package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Key events leave the cluster in the Standard Webhooks format (internal/webhookdelivery): a
// tenant subscribes an HTTPS endpoint of its own to its namespace's key events with a
// KeyWebhook; the operator records each event once, durably, in the namespace's WebhookOutbox
// in the system namespace; the component that sends (the only one with egress) delivers it
// at least once and reports on the KeyWebhook's status.

// KeyEventType names a key event a KeyWebhook can subscribe to: the Standard Webhooks event
// type of its payloads (internal/webhookdelivery.EventType).
// +kubebuilder:validation:Enum=apikey.created;apikey.revealed;apikey.rotated;apikey.renewed;apikey.expiring;apikey.unused;apikey.revoked;apikey.expired;apikey.leaked;apikey.credits_low;apikey.credits_exhausted;apikey.credits_refilled;apikey.misused
type KeyEventType string

// Bounds of a KeyWebhook, as the markers state them.
const (
	MaxWebhookURLLength = 2048
)

// KeyWebhookSecretReference names the Secret, in the KeyWebhook's namespace, that holds its
// signing secrets.
type KeyWebhookSecretReference struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the entry of the Secret's data holding the signing secrets: one or more
	// "whsec_<base64>" separated by spaces, every one signing each delivery (so a receiver can
	// move to a new secret before the old one is removed). "secret" when absent.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// KeyWebhookSpec is the tenant's subscription.
type KeyWebhookSpec struct {
	// url is the HTTPS endpoint the events are POSTed to. Endpoints that resolve to loopback,
	// link-local or the cluster's own networks are refused unless the platform allows them.
	// +required
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="url is an http(s) URL; plain http is refused unless the platform allows it"
	URL string `json:"url"`

	// eventTypes are the events delivered; all of them when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=13
	EventTypes []KeyEventType `json:"eventTypes,omitempty"`

	// signingSecretRef names the Secret holding the "whsec_" secrets each delivery is signed
	// with (webhook-signature).
	// +required
	SigningSecretRef KeyWebhookSecretReference `json:"signingSecretRef"`
}

// KeyWebhookStatus is what the sender found and did.
type KeyWebhookStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True while deliveries are made, False with a reason when they are
	// not (InvalidEndpoint, SigningSecretMissing, Gone after a 410, Failing after the last
	// retry failed).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// lastDeliveryTime is when a delivery last succeeded.
	// +optional
	LastDeliveryTime *metav1.Time `json:"lastDeliveryTime,omitempty"`

	// pending is how many deliveries wait in the outbox.
	// +optional
	Pending int32 `json:"pending,omitempty"`

	// dropped is how many events were never delivered: the outbox was full, or every retry
	// failed.
	// +optional
	Dropped int64 `json:"dropped,omitempty"`
}

// Conditions and reasons of a KeyWebhook.
const (
	ReasonWebhookActive          = "Active"
	ReasonWebhookInvalidEndpoint = "InvalidEndpoint"
	ReasonWebhookSecretMissing   = "SigningSecretMissing"
	ReasonWebhookGone            = "Gone"
	ReasonWebhookFailing         = "Failing"
)

// KeyWebhook subscribes an endpoint to the key events of its namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=switchboard
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pending`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KeyWebhook struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the subscription.
	// +required
	Spec KeyWebhookSpec `json:"spec"`

	// status is what the sender did.
	// +optional
	Status KeyWebhookStatus `json:"status,omitempty"`
}

// KeyWebhookList is a list of KeyWebhooks.
// +kubebuilder:object:root=true
type KeyWebhookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KeyWebhook `json:"items"`
}

// Bounds of the records in the system namespace: what one tenant can make switchboard keep.
const (
	// MaxOutboxMessages is how many deliveries one namespace's outbox holds; the oldest are
	// dropped (and counted) beyond it.
	MaxOutboxMessages = 256
	// MaxOutboxBodyBytes bounds one message's body (a key event's JSON is well under 4 KiB).
	MaxOutboxBodyBytes = 8192
	// MaxHistoryEvents is how many events one key's history keeps; the oldest go first.
	MaxHistoryEvents = 64
)

// WebhookMessage is one event to deliver to one KeyWebhook: its body fixed when the event was
// recorded, its webhook-id the same on every attempt.
type WebhookMessage struct {
	// id is the webhook-id ("msg_…"), derived from the KeyWebhook's UID and the event, so that
	// recording the same event twice (after a crash) is one message.
	// +required
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`

	// webhookName and webhookUID name the KeyWebhook it goes to.
	// +required
	// +kubebuilder:validation:MaxLength=253
	WebhookName string `json:"webhookName"`
	// +required
	// +kubebuilder:validation:MaxLength=36
	WebhookUID string `json:"webhookUID"`

	// type is the event's type.
	// +required
	Type KeyEventType `json:"type"`

	// body is the event's JSON exactly as signed and sent.
	// +required
	// +kubebuilder:validation:MaxLength=8192
	Body string `json:"body"`

	// attempts is how many attempts were made.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// nextAttemptTime is when the next attempt is due; now when absent.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
}

// WebhookEndpointState is the sender's record of one KeyWebhook, kept where tenants cannot
// write: its status only mirrors it.
type WebhookEndpointState struct {
	// webhookUID is the KeyWebhook's UID.
	// +required
	// +kubebuilder:validation:MaxLength=36
	WebhookUID string `json:"webhookUID"`

	// disabledGeneration, when set, is the KeyWebhook generation its endpoint answered 410 Gone
	// at: nothing is sent to it until its spec changes.
	// +optional
	DisabledGeneration int64 `json:"disabledGeneration,omitempty"`

	// dropped counts its events never delivered.
	// +optional
	Dropped int64 `json:"dropped,omitempty"`

	// lastDeliveryTime is when a delivery to it last succeeded.
	// +optional
	LastDeliveryTime *metav1.Time `json:"lastDeliveryTime,omitempty"`

	// lastError is why its last attempt failed, naming the endpoint by scheme and host only.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastError string `json:"lastError,omitempty"`
}

// WebhookOutboxSpec is one namespace's pending deliveries. The operator appends; the sender
// removes what it delivered and records attempts.
type WebhookOutboxSpec struct {
	// namespace is the tenant namespace whose events these are.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// messages wait for delivery, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Messages []WebhookMessage `json:"messages,omitempty"`

	// endpoints are the sender's records of the namespace's KeyWebhooks.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Endpoints []WebhookEndpointState `json:"endpoints,omitempty"`

	// dropped counts messages dropped because the outbox was full.
	// +optional
	Dropped int64 `json:"dropped,omitempty"`
}

// WebhookOutbox holds, in the system namespace, one tenant namespace's key events waiting for
// delivery: recorded before the change they report is published, so an event survives any
// restart of the operator or the sender. Its name is "outbox-<namespace>".
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=switchboard
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Dropped",type=integer,JSONPath=`.spec.dropped`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebhookOutbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the outbox.
	// +required
	Spec WebhookOutboxSpec `json:"spec"`
}

// WebhookOutboxList is a list of WebhookOutboxes.
// +kubebuilder:object:root=true
type WebhookOutboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebhookOutbox `json:"items"`
}

// WebhookOutboxName is the name of namespace's outbox in the system namespace.
func WebhookOutboxName(namespace string) string { return "outbox-" + namespace }

// KeyHistoryEvent is one event of a key's life.
type KeyHistoryEvent struct {
	// id identifies the event: the same event recorded twice is kept once.
	// +required
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`

	// type is what happened.
	// +required
	Type KeyEventType `json:"type"`

	// time is when it happened.
	// +required
	Time metav1.Time `json:"time"`

	// keyGeneration is the generation of the key it happened to.
	// +required
	KeyGeneration int64 `json:"keyGeneration"`

	// keyHint is that key's hint; never the key.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KeyHint string `json:"keyHint,omitempty"`

	// message says what happened, in words (who rotated, where a leak was found).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
}

// APIKeyHistorySpec is one key's life, as the operator recorded it.
type APIKeyHistorySpec struct {
	// apiKey names the APIKey, by UID.
	// +required
	APIKey LeakedKeyReference `json:"apiKey"`

	// events, oldest first, at most 64: the oldest are dropped first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Events []KeyHistoryEvent `json:"events,omitempty"`

	// dropped counts the events dropped to keep the bound.
	// +optional
	Dropped int64 `json:"dropped,omitempty"`
}

// APIKeyHistory keeps, in the system namespace, a key's events for longer than Kubernetes
// Events' hour: what kubectl switchboard key history shows. Its name is "history-<APIKey
// UID>"; the operator deletes it with the APIKey's hash Secret.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=switchboard
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.apiKey.namespace`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.spec.apiKey.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type APIKeyHistory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the history.
	// +required
	Spec APIKeyHistorySpec `json:"spec"`
}

// APIKeyHistoryList is a list of APIKeyHistories.
// +kubebuilder:object:root=true
type APIKeyHistoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIKeyHistory `json:"items"`
}

// APIKeyHistoryName is the name of the history of the APIKey with UID uid.
func APIKeyHistoryName(uid string) string { return "history-" + uid }
