// Package creditalerts tells a platform how a key's credits go, a concern of the APIKey
// controller: the key events apikey.credits_low (at 80 % and at 90 % of a period's credits),
// apikey.credits_exhausted and apikey.credits_refilled, each once per period.
//
// It decides from two things switchboard wrote: status.credits, the balance the API server
// counts and writes with lastUsedAt (so the events are as fresh as that write), and
// status.creditAlerts, the operator's record of the period it last saw and how far the use went
// in it, which the API server may not write (the server status policy). Next is the record
// after seeing a balance, Alerts the events the change of record tells; both are pure, so a
// reconcile that lost its status patch computes the same events again (the same ids: the
// journal records each once) and an operator restart sends nothing twice.
package creditalerts

import (
	"fmt"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// levels are the levels of use in order; a level's rank is its index.
var levels = []switchboardv1alpha1.CreditAlertLevel{
	switchboardv1alpha1.CreditsUnder80, switchboardv1alpha1.CreditsUsed80,
	switchboardv1alpha1.CreditsUsed90, switchboardv1alpha1.CreditsExhausted,
}

// rank is l's place in levels (0 for a level it does not know).
func rank(l switchboardv1alpha1.CreditAlertLevel) int {
	for i, x := range levels {
		if x == l {
			return i
		}
	}
	return 0
}

// LevelOf is how far the use of c's period went: Exhausted at no credit left, else the highest
// threshold its used credits reached of used + remaining (the period's amount as the server
// applied it, whatever the spec says since).
func LevelOf(c *switchboardv1alpha1.APIKeyCreditsStatus) switchboardv1alpha1.CreditAlertLevel {
	amount := c.Used + c.Remaining
	switch {
	case c.Remaining <= 0:
		return switchboardv1alpha1.CreditsExhausted
	case c.Used*100 >= amount*90: // at most 2^40×100: no overflow
		return switchboardv1alpha1.CreditsUsed90
	case c.Used*100 >= amount*80:
		return switchboardv1alpha1.CreditsUsed80
	}
	return switchboardv1alpha1.CreditsUnder80
}

// samePeriod says whether record rec is of c's period.
func samePeriod(rec *switchboardv1alpha1.APIKeyCreditAlerts, c *switchboardv1alpha1.APIKeyCreditsStatus) bool {
	return rec.Period == c.Period && rec.PeriodEnd.Equal(&c.PeriodEnd)
}

// Next is the record after seeing balance c, with rec the record so far (nil: none). No
// balance, or one of a period that ended before rec's (a replica's late write), changes
// nothing, and so does a balance under 80 % when the record says nothing more (none, or under
// 80 %: no refill to tell either); in rec's period the level only rises (an amount raised
// during the period does not send its thresholds twice); a later period starts a record of
// its own.
func Next(rec *switchboardv1alpha1.APIKeyCreditAlerts, c *switchboardv1alpha1.APIKeyCreditsStatus) *switchboardv1alpha1.APIKeyCreditAlerts {
	if c == nil || c.Period == "" {
		return rec
	}
	level := LevelOf(c)
	switch {
	case level == switchboardv1alpha1.CreditsUnder80 && (rec == nil || rec.Level == switchboardv1alpha1.CreditsUnder80):
		// Nothing to tell now or at the next refill: the record stays as it is, and the
		// server's writes wake no reconcile (Due).
		return rec
	case rec == nil:
	case samePeriod(rec, c):
		if rank(level) <= rank(rec.Level) {
			return rec
		}
	case c.PeriodEnd.Before(&rec.PeriodEnd):
		return rec
	}
	return &switchboardv1alpha1.APIKeyCreditAlerts{Period: c.Period, PeriodEnd: c.PeriodEnd, Level: level}
}

// Due says whether seeing c changes rec: whether an APIKey whose status.credits changed needs
// a reconcile (the server rewrites the balance at every write; most change nothing here).
func Due(rec *switchboardv1alpha1.APIKeyCreditAlerts, c *switchboardv1alpha1.APIKeyCreditsStatus) bool {
	return Next(rec, c) != rec
}

// Alert is one credit event due: its type, when it happened, the balance it reports and what it
// says in words.
type Alert struct {
	Type webhookdelivery.EventType
	At   time.Time
	Data webhookdelivery.CreditsData
	// Reason is the Kubernetes Event's reason; Warning says it is a warning.
	Reason  string
	Warning bool
	// Message is what happened, in words, with the key's hint.
	Message string
}

// thresholds are the levels apikey.credits_low is sent at, with their percentages.
var thresholds = map[switchboardv1alpha1.CreditAlertLevel]int{
	switchboardv1alpha1.CreditsUsed80: webhookdelivery.CreditThresholds[0],
	switchboardv1alpha1.CreditsUsed90: webhookdelivery.CreditThresholds[1],
}

// Alerts are the events the record's change from before to after tells, c being the balance
// after was made from, in order: apikey.credits_refilled when after starts a period and before's
// reached 80 % (at before's end, when the credits came back), then one event per level after
// reached above where before's period stood (all of them in a new period): credits_low at 80 %
// and 90 %, credits_exhausted. A key that went from 50 % to none between two writes gets the
// three. hint is the key's status.keyHint.
func Alerts(before, after *switchboardv1alpha1.APIKeyCreditAlerts, c *switchboardv1alpha1.APIKeyCreditsStatus, hint string) []Alert {
	if after == nil || after == before || c == nil || !samePeriod(after, c) {
		return nil
	}
	balance := webhookdelivery.CreditsData{Period: c.Period, PeriodEnd: c.PeriodEnd.UTC(), Used: c.Used, Remaining: c.Remaining, Amount: c.Used + c.Remaining}
	end := c.PeriodEnd.UTC().Format(time.RFC3339)
	var out []Alert
	from := 0
	switch {
	case before != nil && samePeriod(before, c):
		from = rank(before.Level)
	case before != nil && rank(before.Level) >= rank(switchboardv1alpha1.CreditsUsed80):
		out = append(out, Alert{Type: webhookdelivery.KeyCreditsRefilled, At: before.PeriodEnd.UTC(), Data: balance, Reason: "CreditsRefilled",
			Message: fmt.Sprintf("key %s has its credits again: the period ending %s, where it reached %s, was followed by the one ending %s (%d of %d left)",
				hint, before.PeriodEnd.UTC().Format(time.RFC3339), before.Level, end, c.Remaining, balance.Amount)})
	}
	at := c.ObservedAt.UTC()
	for r := from + 1; r <= rank(after.Level); r++ {
		switch l := levels[r]; l {
		case switchboardv1alpha1.CreditsExhausted:
			out = append(out, Alert{Type: webhookdelivery.KeyCreditsExhausted, At: at, Data: balance, Reason: "CreditsExhausted", Warning: true,
				Message: fmt.Sprintf("key %s used all its credits (%d) of the period ending %s; its requests are refused until then", hint, balance.Amount, end)})
		default:
			low := balance
			low.ThresholdPercent = thresholds[l]
			out = append(out, Alert{Type: webhookdelivery.KeyCreditsLow, At: at, Data: low, Reason: "CreditsLow", Warning: true,
				Message: fmt.Sprintf("key %s passed %d %% of its credits (%d of %d used) in the period ending %s", hint, low.ThresholdPercent, c.Used, balance.Amount, end)})
		}
	}
	return out
}
