package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lifetimes and renewal, as cert-manager gives certificates (duration, renewBefore,
// renewBeforePercentage): each issued key ends lifetime after its issue, and a key delivered
// into spec.secretName is replaced before that by a new one, the old one staying valid until
// its own end. A key that is only revealed cannot be replaced without a person: it is warned
// about instead (the ExpiringSoon condition).

// Bounds of the lifecycle fields, as the markers state them.
const (
	MinKeyLifetime           = "2m"
	MaxKeyLifetime           = "87600h" // ten years
	MaxSecretTemplateEntries = 16
	MinLeakOverlap           = "5s"
	MaxLeakOverlap           = "5m"
)

// APIKeySecretTemplate is what the delivery Secret carries besides the key, for its consumers:
// labels and annotations such as Reloader's, which restart the pods that mount it on rotation.
// switchboard's own labels (app.kubernetes.io/managed-by, switchboard.dev/*) always win.
// +kubebuilder:validation:XValidation:rule="!has(self.labels) || self.labels.all(k, size(k) <= 317 && size(self.labels[k]) <= 63)",message="secretTemplate.labels keys are at most 317 characters (prefix/name) and values at most 63"
// +kubebuilder:validation:XValidation:rule="!has(self.annotations) || self.annotations.all(k, size(k) <= 317 && size(self.annotations[k]) <= 1024)",message="secretTemplate.annotations keys are at most 317 characters and values at most 1024"
type APIKeySecretTemplate struct {
	// labels are added to the delivery Secret (at most 16).
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the delivery Secret (at most 16).
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Weekday is a day of the week, as renewal windows name them.
// +kubebuilder:validation:Enum=Monday;Tuesday;Wednesday;Thursday;Friday;Saturday;Sunday
type Weekday string

// APIKeyRenewalWindow is a window in which a due renewal may happen, so that keys are replaced
// when the consumers' owners expect it (a maintenance window). It opens either weekly, at start
// on each of days, or at each time of a cron expression (cert-manager's renewal windows), in
// timeZone, and stays open for duration.
// +kubebuilder:validation:XValidation:rule="has(self.start) != has(self.cron)",message="a renewal window opens at start (on days) or at the times of cron: give exactly one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.cron) || !has(self.days) || size(self.days) == 0",message="days go with start; a cron expression names its own days"
type APIKeyRenewalWindow struct {
	// days are the days it opens on at start; empty means every day.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`

	// start is the time of day it opens, HH:MM on a 24-hour clock, e.g. "02:00".
	// +optional
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start,omitempty"`

	// cron opens it at each time of a standard five-field cron expression (minute, hour,
	// day of month, month, day of week), e.g. "0 2 * * 1-5" (02:00 on weekdays) or "0 1 1 * *"
	// (01:00 on the first of each month). The operator's admission webhook refuses
	// expressions that never match, and windows of which none opens within the renewal period.
	// +optional
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z*,/?-]+( +[0-9A-Za-z*,/?-]+){4}$`
	Cron string `json:"cron,omitempty"`

	// duration is how long it stays open, from 1m to 24h, written like 2h or 90m.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$') && duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="a renewal window's duration is from 1m to 24h, written like 2h or 90m"
	Duration metav1.Duration `json:"duration"`

	// timeZone is the IANA time zone of start, e.g. Europe/Paris; UTC when absent.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`
}

// APIKeyLifecycle is the part of the spec that looks after a key over time.
// +kubebuilder:validation:XValidation:rule="!(has(self.renewBefore) && has(self.renewBeforePercentage))",message="give renewBefore or renewBeforePercentage, not both"
// +kubebuilder:validation:XValidation:rule="!(has(self.renewBefore) || has(self.renewBeforePercentage)) || has(self.lifetime)",message="renewBefore and renewBeforePercentage need a lifetime: a key that never ends is never renewed"
// +kubebuilder:validation:XValidation:rule="!has(self.renewBefore) || !has(self.lifetime) || !self.lifetime.matches('^([0-9]+[hms])+$') || !self.renewBefore.matches('^([0-9]+[hms])+$') || duration(self.renewBefore) < duration(self.lifetime)",message="renewBefore must be shorter than lifetime, or every key would be replaced as soon as it is issued"
// +kubebuilder:validation:XValidation:rule="!has(self.renewalWindows) || size(self.renewalWindows) == 0 || has(self.renewBefore) || has(self.renewBeforePercentage)",message="renewalWindows need renewBefore or renewBeforePercentage: they say when a due renewal may happen"
// +kubebuilder:validation:XValidation:rule="!has(self.renewalWindows) || size(self.renewalWindows) == 0 || self.renewalWindows.exists(w, has(w.cron)) || !has(self.lifetime) || !(has(self.renewBefore) || has(self.renewBeforePercentage)) || !self.lifetime.matches('^([0-9]+[hms])+$') || (has(self.renewBefore) && !self.renewBefore.matches('^([0-9]+[hms])+$')) || self.renewalWindows.exists(w, !w.duration.matches('^([0-9]+[hms])+$') || ((!has(w.days) || size(w.days) == 0) ? (has(self.renewBefore) ? duration(self.renewBefore).getSeconds() : duration(self.lifetime).getSeconds() * self.renewBeforePercentage / 100) + duration(w.duration).getSeconds() >= 86400 : [0, 1, 2, 3, 4, 5, 6].all(d, w.days.exists(x, (({'Monday': 0, 'Tuesday': 1, 'Wednesday': 2, 'Thursday': 3, 'Friday': 4, 'Saturday': 5, 'Sunday': 6}[x] - d + 6) % 7) + 1 <= ((has(self.renewBefore) ? duration(self.renewBefore).getSeconds() : duration(self.lifetime).getSeconds() * self.renewBeforePercentage / 100) + duration(w.duration).getSeconds()) / 86400))))",message="no renewal window opens within the renewal period (renewBefore, or renewBeforePercentage of lifetime): the key would end before it could be renewed; widen a window, open it on more days, or renew earlier"
type APIKeyLifecycle struct {
	// lifetime is how long each issued key is accepted, from its issue, written like 720h
	// (30 days) or 2160h (90 days), from 2m to 87600h. Absent: a key lasts until expiresAt, a
	// revocation or a rotation.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$')",message="lifetime is written like 720h, 90m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+[hms])+$') || (duration(self) >= duration('2m') && duration(self) <= duration('87600h'))",message="lifetime must be from 2m to 87600h (ten years)"
	Lifetime *metav1.Duration `json:"lifetime,omitempty"`

	// renewBefore is how long before the current key's end a new key is issued into
	// spec.secretName; the old key stays valid until its end, so this is the time consumers
	// have to pick the new one up. Needs lifetime.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$') && duration(self) >= duration('1m')",message="renewBefore is at least 1m, written like 168h or 30m"
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`

	// renewBeforePercentage is renewBefore as a percentage of lifetime, from 1 to 99 (cert-manager's
	// renewBeforePercentage): 33 renews a 90-day key 30 days before it ends.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	RenewBeforePercentage *int32 `json:"renewBeforePercentage,omitempty"`

	// renewalWindows, when set, hold a due renewal until one of them is open (at most 8). The
	// API server refuses windows of which none opens within the renewal period: weekly ones by
	// itself, any with cron through the operator's admission webhook, which checks them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	RenewalWindows []APIKeyRenewalWindow `json:"renewalWindows,omitempty"`

	// revokeWhenUnusedFor revokes the key for good once it has not authenticated a request for
	// this long (counting from its creation), like the CIS benchmarks' "disable credentials
	// unused for 45 days": at least 24h, written like 1080h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$') && duration(self) >= duration('24h')",message="revokeWhenUnusedFor is at least 24h, written like 1080h (45 days)"
	RevokeWhenUnusedFor *metav1.Duration `json:"revokeWhenUnusedFor,omitempty"`

	// graceEndsWhenUnusedFor ends the old key's grace after a rotation (manual, renewal,
	// redelivery) early, once its consumers have moved to the new key: the old key has not
	// authenticated a request for this long since the new one was written, and every pod that
	// takes the key as an environment variable or through a subPath mount (and so cannot see the
	// new one without a restart) started after it was written. Pods that mount the Secret as a
	// whole volume see the new key without a restart and are judged by traffic alone. The fixed
	// grace (spec.rotation.gracePeriod, the old key's own end) stays the upper bound. Reading
	// pods and workloads takes the Role the namespace binds for switchboard (docs/keys.md):
	// without it the pods cannot be judged, the grace ends at its fixed bound, and the
	// GraceEvidence condition says so. From 2m (longer than the API server's lastUsedAt write
	// interval) to 720h, written like 10m or 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$') && duration(self) >= duration('2m') && duration(self) <= duration('720h')",message="graceEndsWhenUnusedFor is from 2m to 720h, written like 10m or 1h"
	GraceEndsWhenUnusedFor *metav1.Duration `json:"graceEndsWhenUnusedFor,omitempty"`

	// leakOverlap, when set, has a leaked delivered key replaced first: after a verified leak
	// report the new key is written to spec.secretName (and the workloads reading it rolled,
	// where the namespace opted in), and the leaked key keeps working for this long, never
	// longer, so that its consumers move without failed requests. From 5s (less is no overlap:
	// no pod reads a new Secret that fast) to 5m (about what a kubelet takes to refresh a
	// mounted Secret and a Deployment to roll; longer leaves a public key working for nothing),
	// written like 30s or 2m. Absent: a leaked key is refused at once. A key that is only
	// revealed is always refused at once: nothing moves to its replacement without a person.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$') && duration(self) >= duration('5s') && duration(self) <= duration('5m')",message="leakOverlap is from 5s to 5m, written like 30s or 2m"
	LeakOverlap *metav1.Duration `json:"leakOverlap,omitempty"`
}

// Conditions and reasons of the lifecycle.
const (
	// ConditionExpiringSoon is True when the current key ends within the operator's warning
	// period (--expiry-warning, 7 days by default) and no new key will replace it on its own,
	// or when its renewal time passed without a delivery Secret to renew into.
	ConditionExpiringSoon = "ExpiringSoon"
	// ConditionUnused is True when the key has not authenticated a request for --unused-after
	// (90 days by default), counting from its creation.
	ConditionUnused = "Unused"
	// ConditionRenewalLimited is True when the lifecycle renews the key more often than the
	// platform allows (the operator's --min-renewal-interval): it is renewed at that interval
	// instead. Absent otherwise. The admission webhook refuses such lifecycles; this is for keys
	// stored before the minimum was set, or while no webhook answered.
	ConditionRenewalLimited = "RenewalLimited"

	ReasonEndsSoon          = "EndsSoon"
	ReasonRenewalNeedsHuman = "RenewalNeedsAPerson"
	ReasonNotEndingSoon     = "NotEndingSoon"
	ReasonUnused            = "NotUsedRecently"
	ReasonUsed              = "UsedRecently"
	ReasonRenewed           = "Renewed"
	ReasonUnusedRevoked     = "RevokedWhenUnused"
	ReasonRenewsTooOften    = "RenewsTooOften"
)

// The GraceEvidence condition: present while an old key is in its grace and
// spec.graceEndsWhenUnusedFor asks for the grace to end on evidence; it says what keeps the old
// key accepted. Its reasons say which evidence is missing.
const (
	// ConditionGraceEvidence is True once the evidence says the old key's consumers have moved
	// (its grace is then ended), False while it does not (the message says what holds it).
	ConditionGraceEvidence = "GraceEvidence"

	// ReasonConsumersMoved: the old key went unused for the quiet period and every pod that
	// takes it by environment variable or subPath started after the new key was written.
	ReasonConsumersMoved = "ConsumersMoved"
	// ReasonPreviousKeyInUse: the old key authenticated a request within the quiet period.
	ReasonPreviousKeyInUse = "PreviousKeyInUse"
	// ReasonPodsHoldPreviousKey: pods that take the key by environment variable or subPath
	// started before the new key was written; the message names them and their workloads.
	ReasonPodsHoldPreviousKey = "PodsHoldPreviousKey"
	// ReasonWorkloadsNotReadable: switchboard may not read the namespace's workloads and pods
	// (the opt-in Role is not bound), so the grace ends at its fixed bound.
	ReasonWorkloadsNotReadable = "WorkloadsNotReadable"
)
