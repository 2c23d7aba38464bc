package keyindex

import (
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// refills are the Schedule refills of spec.credits.refill.
var refills = map[switchboardv1alpha1.CreditsRefill]ratelimit.Refill{
	switchboardv1alpha1.CreditsHourly: ratelimit.Hourly, switchboardv1alpha1.CreditsDaily: ratelimit.Daily,
	switchboardv1alpha1.CreditsWeekly: ratelimit.Weekly, switchboardv1alpha1.CreditsMonthly: ratelimit.Monthly,
}

// setCredits adds k's spec.credits to key's policy, after setPolicy has read its rate (a key
// with credits and no rate gets a policy of credits alone). As with the rate, a value the CRD
// would refuse errs on the side of the key doing less: a schedule that cannot be read is a
// Monthly one in UTC, and an amount out of bounds the nearest within them.
func setCredits(key *Key, k *switchboardv1alpha1.APIKey) error {
	c := k.Spec.Credits
	if c == nil {
		return nil
	}
	var err error
	weekday := time.Monday
	for d := time.Sunday; d <= time.Saturday; d++ {
		if string(c.Weekday) == d.String() {
			weekday = d
		}
	}
	zone := c.TimeZone
	if zone == "" || zone == "Local" {
		// The server's own zone is no calendar a key's owner can know.
		zone = "UTC"
	}
	s, serr := ratelimit.NewSchedule(refills[c.Refill], zone, weekday, int(max(c.DayOfMonth, 1)))
	if serr != nil {
		err = errorf("APIKey %s/%s: credits: %v; refilling them monthly in UTC", k.Namespace, k.Name, serr)
		s, _ = ratelimit.NewSchedule(ratelimit.Monthly, "UTC", weekday, 1)
	}
	var l ratelimit.Limit
	if key.RateLimit != nil {
		l = key.RateLimit.Limit
	}
	amount := min(max(c.Amount, 1), ratelimit.MaxCredits)
	p, perr := ratelimit.NewCreditPolicy(string(k.UID), l, ratelimit.Credits{Amount: amount, Schedule: s})
	if perr != nil {
		return errorf("APIKey %s/%s: credits: %v", k.Namespace, k.Name, perr)
	}
	key.RateLimit = p
	return err
}
