package ratelimit

import (
	"slices"
	"time"
)

// creditRecord is a key's credits as a store keeps them (Credits says why this shape). Memory
// keeps it as is; Redis as the fields of one hash (redis_credits.go), decided by a script that
// does what settle and take do here, line for line.
type creditRecord struct {
	// kind is the Schedule.Kind the record counts under; a record of another kind (or none)
	// starts afresh, its grants' counts kept.
	kind      string
	cur, prev creditPeriod
	// anchor is when an Interval key was first charged, Unix milliseconds; 0 before.
	anchor int64
	// grants is what each grant spent, by ID.
	grants map[string]int64
}

// creditPeriod is one period's numbers in a record.
type creditPeriod struct {
	index int64
	// spent is what the period's requests took from its allowance (not from grants).
	spent int64
	// carry is what the periods before left it, up to Cap - Amount: its allowance is
	// min(Cap, Amount + carry).
	carry int64
}

// allowance is what x gives under c.
func (c *Credits) allowance(x creditPeriod) int64 { return min(c.Cap, c.Amount+x.carry) }

// settle returns rec as of now: of p's kind, its Interval anchor set (at now, for a key never
// charged), and moved on to the period of now, which it also returns. Calendar periods come
// from p's schedule; on a test's request, at is the period to settle on instead (a late request).
func (p *Policy) settle(rec creditRecord, now time.Time, at *Period) (creditRecord, Period) {
	c := p.Credits
	kind := p.creditsKind
	fresh := rec.kind != kind
	if fresh {
		rec = creditRecord{kind: kind, grants: rec.grants}
	}
	var period Period
	switch {
	case at != nil:
		period = *at
	case c.Schedule.Refill == Interval:
		nowMs := now.UnixMilli()
		if rec.anchor == 0 {
			rec.anchor = nowMs
		}
		period = c.Schedule.intervalPeriod(rec.anchor, floorDiv(nowMs-rec.anchor, c.Schedule.Every.Milliseconds()))
	default:
		period = c.Schedule.Period(now)
	}
	idx := period.Index
	switch {
	case fresh:
		rec.cur, rec.prev = creditPeriod{index: idx}, creditPeriod{index: idx - 1}
	case idx > rec.cur.index:
		// Each period passed gives Amount and keeps what the one before left, up to Cap: the
		// first from the current period's balance, every idle one after it Amount more.
		left := max(c.allowance(rec.cur)-rec.cur.spent, 0)
		first := min(c.Cap, c.Amount+left)
		after := func(periods int64) int64 { // the allowance periods after the first
			if periods >= (c.Cap-first)/c.Amount+1 {
				return c.Cap
			}
			return min(c.Cap, first+periods*c.Amount)
		}
		gap := idx - rec.cur.index
		if gap == 1 {
			rec.prev = rec.cur
		} else {
			rec.prev = creditPeriod{index: idx - 1, carry: after(gap-2) - c.Amount}
		}
		rec.cur = creditPeriod{index: idx, carry: after(gap-1) - c.Amount}
	}
	return rec, period
}

// intervalPeriod is the n-th period of an Interval schedule anchored at anchor (Unix ms).
func (s Schedule) intervalPeriod(anchor, n int64) Period {
	return s.PeriodFrom(time.UnixMilli(anchor), time.UnixMilli(anchor).Add(time.Duration(n)*s.Every))
}

// take decides a request costing cost against rec, settled on period: it returns whether
// enough credits remain and what remains; when charge is set and they do, it charges rec (and
// what remains is after the charge): the period's allowance first, then the grants in p's order.
// A request for a period the record no longer holds (older than the previous one) is refused.
func (p *Policy) take(rec *creditRecord, period Period, cost int64, now time.Time, charge bool) (bool, int64, Charge) {
	c := p.Credits
	var target *creditPeriod
	switch period.Index {
	case rec.cur.index:
		target = &rec.cur
	case rec.prev.index:
		target = &rec.prev
	default:
		return false, 0, Charge{}
	}
	fromPeriod := max(c.allowance(*target)-target.spent, 0)
	total := fromPeriod
	var left [MaxGrants]int64
	for i, g := range c.Grants {
		if g.ExpiresAt.IsZero() || now.Before(g.ExpiresAt) {
			left[i] = max(g.Amount-rec.grants[g.ID], 0)
			total += left[i]
		}
	}
	if total < cost {
		return false, total, Charge{}
	}
	if !charge {
		return true, total, Charge{}
	}
	ch := Charge{Period: period.Index, FromPeriod: min(cost, fromPeriod)}
	target.spent += ch.FromPeriod
	for i, due := 0, cost-ch.FromPeriod; due > 0; i++ {
		n := min(due, left[i])
		if n == 0 {
			continue
		}
		if ch.FromGrants == nil {
			ch.FromGrants = new([MaxGrants]int64)
		}
		if rec.grants == nil {
			rec.grants = map[string]int64{}
		}
		ch.FromGrants[i] = n
		rec.grants[c.Grants[i].ID] += n
		due -= n
	}
	return true, total - cost, ch
}

// forgetGrants drops from rec the counts of grants p no longer has, or that expired: what they
// had left goes with them (the script does the same).
func (p *Policy) forgetGrants(rec *creditRecord, now time.Time) {
	for id := range rec.grants {
		i := slices.IndexFunc(p.Credits.Grants, func(g Grant) bool { return g.ID == id })
		if i < 0 || !p.Credits.Grants[i].ExpiresAt.IsZero() && !now.Before(p.Credits.Grants[i].ExpiresAt) {
			delete(rec.grants, id)
		}
	}
}

// refund gives back to rec what ch took, to the period and grants it took from, as far as rec
// still holds them (a period two behind is gone, and so are its credits).
func (p *Policy) refund(rec *creditRecord, ch Charge) {
	switch ch.Period {
	case rec.cur.index:
		rec.cur.spent = max(rec.cur.spent-ch.FromPeriod, 0)
	case rec.prev.index:
		rec.prev.spent = max(rec.prev.spent-ch.FromPeriod, 0)
	}
	if ch.FromGrants == nil {
		return
	}
	for i, g := range p.Credits.Grants {
		if spent, ok := rec.grants[g.ID]; ok && ch.FromGrants[i] > 0 {
			rec.grants[g.ID] = max(spent-ch.FromGrants[i], 0)
		}
	}
}

// keep is how long after now the record of p's key, in period, must be kept: the period and
// creditsSlack; with a rollover, until idle periods would have reached Cap (at most
// creditsKeepMax); with grants, until the last expires (and creditsSlack), forever for one
// that never does.
func (p *Policy) keep(period Period, now time.Time) (d time.Duration, forever bool) {
	extra, grants, forever := p.keepBeyond(now)
	return max(period.End.Sub(now)+extra, grants), forever
}

// keepBeyond is keep's parts: how long beyond its period's end the record is kept, and how
// long after now for the grants.
func (p *Policy) keepBeyond(now time.Time) (extra, grants time.Duration, forever bool) {
	c := p.Credits
	extra = creditsSlack
	if c.Cap > c.Amount {
		periods := (c.Cap - c.Amount + c.Amount - 1) / c.Amount
		extra += time.Duration(min(periods, int64(creditsKeepMax/c.Schedule.Longest())+1)) * c.Schedule.Longest()
		extra = min(extra, creditsKeepMax)
	}
	for _, g := range c.Grants {
		if g.ExpiresAt.IsZero() {
			forever = true
		} else if g.ExpiresAt.After(now) {
			grants = max(grants, g.ExpiresAt.Sub(now)+creditsSlack)
		}
	}
	return extra, grants, forever
}

// balance is Limiter.Balance of rec at now.
func (p *Policy) balance(rec creditRecord, now time.Time) Balance {
	// Settling and taking nothing change neither rec's grants nor anything a store holds.
	rec, period := p.settle(rec, now, nil)
	_, remaining, _ := p.take(&rec, period, 0, now, false)
	allowance := p.Credits.allowance(rec.cur)
	used := min(rec.cur.spent, allowance)
	return Balance{Period: period, Used: used, Allowance: allowance, Granted: remaining - (allowance - used), Remaining: remaining}
}
