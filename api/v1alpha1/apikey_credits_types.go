package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CreditsMaxAmount bounds credits.amount (2^40): far above any plan, far below where a count
// could overflow. The server's limiter holds credits to it too.
const CreditsMaxAmount = 1 << 40

// CreditsRefill is how often a key's credits come back: on the calendar of its timeZone, or
// every interval from the key's first use.
// +kubebuilder:validation:Enum=Hourly;Daily;Weekly;Monthly;Interval
type CreditsRefill string

// The refills of credits.
const (
	CreditsHourly  CreditsRefill = "Hourly"
	CreditsDaily   CreditsRefill = "Daily"
	CreditsWeekly  CreditsRefill = "Weekly"
	CreditsMonthly CreditsRefill = "Monthly"
	// CreditsInterval refills every credits.interval from the key's first charged request.
	CreditsInterval CreditsRefill = "Interval"
)

// CreditsRollover is what becomes of a period's unspent credits.
// +kubebuilder:validation:Enum=Reset;Add
type CreditsRollover string

// The rollovers of credits.
const (
	// CreditsReset starts every period with credits.amount: unspent credits are lost.
	CreditsReset CreditsRollover = "Reset"
	// CreditsAdd adds a period's unspent credits to the next one, up to credits.cap.
	CreditsAdd CreditsRollover = "Add"
)

// CreditsMaxGrants bounds credits.grants.
const CreditsMaxGrants = 8

// CreditGrant is a one-off amount of credits, spent after the period's. The server counts what
// it spent under its id: applying the same grant again (GitOps re-applies) adds nothing, and
// removing it removes what it had left (a grant removed and added again is a new one).
type CreditGrant struct {
	// id names the grant among the key's: lowercase letters, digits and '-', up to 63.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ID string `json:"id"`

	// amount is how many credits the grant gives, from 1 to 1099511627776 (2^40).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1099511627776
	Amount int64 `json:"amount"`

	// expiresAt is when what is left of the grant is gone; never when absent. Grants are spent
	// earliest-expiring first.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// APIKeyCredits are how many requests a key may make per period of a calendar (a plan's
// "100,000 requests a month"), beside its rate limit. A request costs one credit unless costs
// say otherwise, charged when it is admitted (or on success, by charge); when too few are left,
// requests get 429 API_KEY_CREDITS_EXHAUSTED until the next period, which starts with the
// whole amount again (with rollover: Add, plus what the previous left, up to cap), grants
// spent after the period's credits.
// +kubebuilder:validation:XValidation:rule="!has(self.weekday) || self.refill == 'Weekly'",message="credits.weekday is only for refill: Weekly"
// +kubebuilder:validation:XValidation:rule="!has(self.dayOfMonth) || self.refill == 'Monthly'",message="credits.dayOfMonth is only for refill: Monthly"
// +kubebuilder:validation:XValidation:rule="(self.refill == 'Interval') == has(self.interval)",message="credits.interval is required with refill: Interval, and only with it"
// +kubebuilder:validation:XValidation:rule="(has(self.rollover) && self.rollover == 'Add') == has(self.cap)",message="credits.cap is required with rollover: Add, and only with it"
// +kubebuilder:validation:XValidation:rule="!has(self.cap) || self.cap >= self.amount",message="credits.cap must be at least credits.amount"
type APIKeyCredits struct {
	// amount is how many requests each period admits, from 1 to 1099511627776 (2^40).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1099511627776
	Amount int64 `json:"amount"`

	// refill is when the credits come back: Hourly (on the hour), Daily (at midnight),
	// Weekly (at midnight starting weekday) or Monthly (at midnight starting dayOfMonth), on
	// the clock of timeZone; or Interval, every interval from the key's first charged request.
	// +required
	Refill CreditsRefill `json:"refill"`

	// interval is how long a period of refill: Interval lasts, from 1m to 8784h, written like
	// 720h or 90m. Its first period starts at the key's first charged request; with the
	// rate-limit Redis the start is kept there, without it in each server replica's memory (a
	// restart starts a new period at the next request).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+[hms])+$') && duration(self) >= duration('1m') && duration(self) <= duration('8784h')",message="credits.interval is from 1m to 8784h, written like 720h or 90m"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// rollover is what becomes of a period's unspent credits: Reset (the default) loses them;
	// Add carries them into the next period, whose credits are then min(cap, amount + unspent),
	// idle periods adding up to cap.
	// +optional
	// +kubebuilder:default=Reset
	Rollover CreditsRollover `json:"rollover,omitempty"`

	// cap bounds a period's credits with rollover: Add (required with it), from amount to
	// 1099511627776 (2^40).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1099511627776
	Cap *int64 `json:"cap,omitempty"`

	// grants are one-off credits, up to 8, each with an id, spent after the period's credits.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=8
	Grants []CreditGrant `json:"grants,omitempty"`

	// timeZone is the IANA time zone of the calendar, e.g. Europe/Paris; UTC when absent. A
	// day across a daylight saving time change lasts 23 or 25 hours.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`

	// weekday is the day a Weekly period starts; Monday when absent.
	// +optional
	Weekday Weekday `json:"weekday,omitempty"`

	// dayOfMonth is the day of the month, 1 to 31, a Monthly period starts, or the month's
	// last day when it is shorter (31 refills on February 28 or 29 and April 30); 1 when absent.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31
	DayOfMonth int32 `json:"dayOfMonth,omitempty"`

	// costs are what a request costs, by route (at most 16): the first cost whose methods,
	// paths and audiences all match a request sets its cost; a request no cost matches costs 1.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Costs []CreditCost `json:"costs,omitempty"`

	// charge is when a request is charged: OnRequest (the default) when it is admitted, or
	// OnSuccess, when its answer is a success (2xx). OnSuccess applies on /v1, where the server
	// answers; through a gateway (ext_authz, forward-auth) the server never sees the answer, so
	// a request is charged when it is admitted there.
	// +optional
	// +kubebuilder:default=OnRequest
	Charge CreditsCharge `json:"charge,omitempty"`
}

// Bounds of credits.costs: how many, and the most one request can cost.
const (
	MaxCreditCosts = 16
	CreditsMaxCost = 1_000_000
)

// CreditsCharge is when a request is charged its credits.
// +kubebuilder:validation:Enum=OnRequest;OnSuccess
type CreditsCharge string

// The charges of credits.
const (
	ChargeOnRequest CreditsCharge = "OnRequest"
	ChargeOnSuccess CreditsCharge = "OnSuccess"
)

// CreditCost is what requests matching a route cost, matched as a permission rule is (without
// a condition or source ranges): every field given must match, and an absent one matches any.
type CreditCost struct {
	// credits is what a matching request costs, from 0 (free) to 1000000.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Credits int64 `json:"credits"`

	// methods are the request methods the cost matches (at most 7); empty or absent means any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Methods []HTTPMethod `json:"methods,omitempty"`

	// paths are the path templates the cost matches (at most 4, each at most 256 characters
	// and 16 segments), written as a permission rule's paths, such as /v1/connections/{id};
	// empty or absent means any path.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^/`
	Paths []string `json:"paths,omitempty"`

	// audiences are the APIs the cost matches (at most 16); empty or absent means any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Audiences []Audience `json:"audiences,omitempty"`
}

// APIKeyCreditsStatus is a key's credit balance as the API server counted it, written with
// status.lastUsedAt (same patch, same write budget), so it is as fresh as lastUsedAt. With the
// rate-limit Redis the counts are exact across replicas; without it each replica counts its own
// requests, and the status shows the counts of the replica that wrote it last.
type APIKeyCreditsStatus struct {
	// period names the period counted (its refill letter and start, Unix seconds).
	// +required
	// +kubebuilder:validation:MaxLength=32
	Period string `json:"period"`

	// periodEnd is when the period ends and the credits refill.
	// +required
	PeriodEnd metav1.Time `json:"periodEnd"`

	// used is how many credits the period had spent when observed.
	// +required
	// +kubebuilder:validation:Minimum=0
	Used int64 `json:"used"`

	// remaining is how many credits the period had left when observed.
	// +required
	// +kubebuilder:validation:Minimum=0
	Remaining int64 `json:"remaining"`

	// observedAt is when the server read the counts.
	// +required
	ObservedAt metav1.Time `json:"observedAt"`
}

// CreditAlertLevel is how much of a period's credits a key used, as far as the credit events
// go: the thresholds at which apikey.credits_low (80 %, 90 %) and apikey.credits_exhausted are
// sent.
// +kubebuilder:validation:Enum=Under80;Used80;Used90;Exhausted
type CreditAlertLevel string

// The levels of credit use, in order.
const (
	CreditsUnder80   CreditAlertLevel = "Under80"
	CreditsUsed80    CreditAlertLevel = "Used80"
	CreditsUsed90    CreditAlertLevel = "Used90"
	CreditsExhausted CreditAlertLevel = "Exhausted"
)

// APIKeyCreditAlerts is the operator's record of the credit events it sent for a key: the
// period of status.credits it last saw and the furthest level reached in it. The API server
// may not write it (the server status policy), so a re-reconcile or an operator restart sends
// nothing twice.
type APIKeyCreditAlerts struct {
	// period is the status.credits period the record is of.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Period string `json:"period"`

	// periodEnd is when that period ends: a status.credits of an earlier end is older than the
	// record and changes nothing.
	// +required
	PeriodEnd metav1.Time `json:"periodEnd"`

	// level is the furthest the period's use went as status.credits showed it.
	// +required
	Level CreditAlertLevel `json:"level"`
}
