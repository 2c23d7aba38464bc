package keyindex

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// refills are the Schedule refills of spec.credits.refill.
var refills = map[switchboardv1alpha1.CreditsRefill]ratelimit.Refill{
	switchboardv1alpha1.CreditsHourly: ratelimit.Hourly, switchboardv1alpha1.CreditsDaily: ratelimit.Daily,
	switchboardv1alpha1.CreditsWeekly: ratelimit.Weekly, switchboardv1alpha1.CreditsMonthly: ratelimit.Monthly,
}

// setCredits adds k's spec.credits to key's policy, after setPolicy has read its rate (a key
// with credits and no rate gets a policy of credits alone), counted under the key's UID.
func setCredits(key *Key, k *switchboardv1alpha1.APIKey) error {
	if k.Spec.Credits == nil {
		return nil
	}
	c, err := Credits(k.Spec.Credits, string(k.UID))
	if err != nil {
		err = errorf("APIKey %s/%s: %v", k.Namespace, k.Name, err)
	}
	var l ratelimit.Limit
	if key.RateLimit != nil {
		l = key.RateLimit.Limit
	}
	p, perr := ratelimit.NewCreditPolicy(string(k.UID), l, c)
	if perr != nil {
		return errorf("APIKey %s/%s: credits: %v", k.Namespace, k.Name, perr)
	}
	key.RateLimit = p
	var cerr error
	key.Costs, key.ChargeOnSuccess, cerr = readCosts(k.Spec.Credits, "APIKey "+k.Namespace+"/"+k.Name)
	return errors.Join(err, cerr)
}

// readCosts reads what a request costs, and whether it is charged on success, from spec (a
// key's credits, or a pool's, named by what): costs that do not compile charge every request
// the largest of them.
func readCosts(spec *switchboardv1alpha1.APIKeyCredits, what string) (*permission.Costs, bool, error) {
	costs, err := permission.CompileCosts(spec.Costs)
	if err != nil {
		err = errorf("%s: credits: %v; charging every request the largest cost", what, err)
	}
	return costs, spec.Charge == switchboardv1alpha1.ChargeOnSuccess, err
}

// Credits reads spec, an APIKey's (or a pool's) credits, into the limiter's, counted under
// counter. As with the rate, a value the CRD would refuse errs on the side of the key doing
// less, and is returned with an error saying so: a schedule that cannot be read is a Monthly
// one in UTC, an amount or a cap out of bounds the nearest within them, a grant past them
// (or past the eighth) left out.
func Credits(spec *switchboardv1alpha1.APIKeyCredits, counter string) (ratelimit.Credits, error) {
	var errs []string
	weekday := time.Monday
	for d := time.Sunday; d <= time.Saturday; d++ {
		if string(spec.Weekday) == d.String() {
			weekday = d
		}
	}
	zone := spec.TimeZone
	if zone == "" || zone == "Local" {
		// The server's own zone is no calendar a key's owner can know.
		zone = "UTC"
	}
	var s ratelimit.Schedule
	var serr error
	if spec.Refill == switchboardv1alpha1.CreditsInterval {
		var every time.Duration
		if spec.Interval != nil {
			every = spec.Interval.Duration
		}
		s, serr = ratelimit.NewIntervalSchedule(every)
	} else {
		s, serr = ratelimit.NewSchedule(refills[spec.Refill], zone, weekday, int(max(spec.DayOfMonth, 1)))
	}
	if serr != nil {
		errs = append(errs, fmt.Sprintf("credits: %v; refilling them monthly in UTC", serr))
		s, _ = ratelimit.NewSchedule(ratelimit.Monthly, "UTC", weekday, 1)
	}
	c := ratelimit.Credits{Amount: min(max(spec.Amount, 1), ratelimit.MaxCredits), Schedule: s, Counter: counter}
	if spec.Rollover == switchboardv1alpha1.CreditsAdd && spec.Cap != nil {
		c.Cap = min(max(*spec.Cap, c.Amount), ratelimit.MaxCredits)
	}
	for _, g := range spec.Grants {
		if len(c.Grants) == ratelimit.MaxGrants || g.ID == "" || g.Amount < 1 || g.Amount > ratelimit.MaxCredits ||
			slices.ContainsFunc(c.Grants, func(o ratelimit.Grant) bool { return o.ID == g.ID }) {
			errs = append(errs, fmt.Sprintf("credits: grant %q left out: at most %d grants, each with an id of its own and an amount from 1 to %d", g.ID, ratelimit.MaxGrants, int64(ratelimit.MaxCredits)))
			continue
		}
		grant := ratelimit.Grant{ID: g.ID, Amount: g.Amount}
		if g.ExpiresAt != nil {
			grant.ExpiresAt = g.ExpiresAt.Time
		}
		c.Grants = append(c.Grants, grant)
	}
	if errs != nil {
		return c, errors.New(strings.Join(errs, "; "))
	}
	return c, nil
}
