package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CreditsMaxAmount bounds credits.amount (2^40): far above any plan, far below where a count
// could overflow. The server's limiter holds credits to it too.
const CreditsMaxAmount = 1 << 40

// CreditsRefill is how often a key's credits come back whole, on the calendar of its timeZone.
// +kubebuilder:validation:Enum=Hourly;Daily;Weekly;Monthly
type CreditsRefill string

// The refills of credits.
const (
	CreditsHourly  CreditsRefill = "Hourly"
	CreditsDaily   CreditsRefill = "Daily"
	CreditsWeekly  CreditsRefill = "Weekly"
	CreditsMonthly CreditsRefill = "Monthly"
)

// APIKeyCredits are how many requests a key may make per period of a calendar (a plan's
// "100,000 requests a month"), beside its rate limit. Each request costs one credit, charged
// when it is made; at zero, requests get 429 API_KEY_CREDITS_EXHAUSTED until the next period,
// which starts with the whole amount again (unspent credits do not roll over).
// +kubebuilder:validation:XValidation:rule="!has(self.weekday) || self.refill == 'Weekly'",message="credits.weekday is only for refill: Weekly"
// +kubebuilder:validation:XValidation:rule="!has(self.dayOfMonth) || self.refill == 'Monthly'",message="credits.dayOfMonth is only for refill: Monthly"
type APIKeyCredits struct {
	// amount is how many requests each period admits, from 1 to 1099511627776 (2^40).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1099511627776
	Amount int64 `json:"amount"`

	// refill is when the credits come back whole: Hourly (on the hour), Daily (at midnight),
	// Weekly (at midnight starting weekday) or Monthly (at midnight starting dayOfMonth), on
	// the clock of timeZone.
	// +required
	Refill CreditsRefill `json:"refill"`

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
