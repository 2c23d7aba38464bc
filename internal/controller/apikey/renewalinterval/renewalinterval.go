// Package renewalinterval bounds how often a key renews itself: the interval a lifecycle
// (lifetime, renewBefore or renewBeforePercentage) yields between two renewals, and the
// platform's least interval (the operator's --min-renewal-interval and
// --min-renewal-interval-percentage), which the admission webhook holds new lifecycles to and
// the operator holds every key to. Every renewal writes the key's Secrets, which every server
// replica watches: a lifecycle of a 2-minute lifetime renewed at 99% would otherwise write them
// every 1.2 seconds, forever.
package renewalinterval

import (
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Minimum is the platform's least interval between two renewals of a key: the larger of Floor
// and Percentage of the key's lifetime. A part that is zero or negative bounds nothing.
type Minimum struct {
	// Floor holds every key, whatever its lifetime.
	Floor time.Duration
	// Percentage of its lifetime holds a long-lived key to a proportionate interval (10: a
	// 90-day key renews at most every 9 days), from 0 to 99.
	Percentage int32
}

// Default is the larger of 5 minutes and 10% of the lifetime: cert-manager's default renewal
// of certificates (at two thirds of their life) is far within it, and the cluster's writes from
// renewals stay below one per 5 minutes for each key.
var Default = Minimum{Floor: 5 * time.Minute, Percentage: 10}

// Of is the least interval between renewals of a key whose lifetime is lifetime.
func (m Minimum) Of(lifetime time.Duration) time.Duration {
	return max(m.Floor, Percent(lifetime, m.Percentage), 0)
}

// String says what m is, for messages: "the larger of 5m0s and 10% of the lifetime".
func (m Minimum) String() string {
	switch {
	case m.Floor > 0 && m.Percentage > 0:
		return fmt.Sprintf("the larger of %s and %d%% of the lifetime", m.Floor, m.Percentage)
	case m.Floor > 0:
		return m.Floor.String()
	case m.Percentage > 0:
		return fmt.Sprintf("%d%% of the lifetime", m.Percentage)
	}
	return "no minimum"
}

// Percent is p percent of d, without overflowing for the longest lifetimes (87600h × 99 does
// not fit in a time.Duration).
func Percent(d time.Duration, p int32) time.Duration {
	if p <= 0 {
		return 0
	}
	return d/100*time.Duration(p) + d%100*time.Duration(p)/100
}

// Before is how long before a key's end lc renews it: renewBefore, or renewBeforePercentage of
// lifetime; 0 when it asks for no renewal.
func Before(lc *switchboardv1alpha1.APIKeyLifecycle) time.Duration {
	switch {
	case lc.RenewBefore != nil:
		return lc.RenewBefore.Duration
	case lc.RenewBeforePercentage != nil && lc.Lifetime != nil:
		return Percent(lc.Lifetime.Duration, *lc.RenewBeforePercentage)
	}
	return 0
}

// Interval is how often lc renews a key: its lifetime less Before, each new key renewed as
// early in its own life as the last. Renewal windows can only hold a renewal back, never
// bring it forward, so they make it no shorter. 0 when lc renews nothing.
func Interval(lc *switchboardv1alpha1.APIKeyLifecycle) time.Duration {
	before := Before(lc)
	if lc.Lifetime == nil || before <= 0 {
		return 0
	}
	return lc.Lifetime.Duration - before
}

// Check says how lc renews a key more often than m allows, for people ("lifetime 2m0s renewed
// 99% (1m58.8s) before its end renews the key every 1.2s; this platform renews a key at most
// every 5m0s (...)"), or "" when it does not.
func (m Minimum) Check(lc *switchboardv1alpha1.APIKeyLifecycle) string {
	every := Interval(lc)
	if every <= 0 {
		return ""
	}
	least := m.Of(lc.Lifetime.Duration)
	if every >= least {
		return ""
	}
	before := fmt.Sprintf("renewBeforePercentage %d (%s)", ptr.Deref(lc.RenewBeforePercentage, 0), Before(lc))
	if lc.RenewBefore != nil {
		before = "renewBefore " + lc.RenewBefore.Duration.String()
	}
	return fmt.Sprintf("lifetime %s with %s renews the key every %s; this platform renews a key at most every %s (%s)",
		lc.Lifetime.Duration, before, every, least, m)
}
