// Package lastused writes APIKeys' status.lastUsedAt (and status.previousKeyUse, the last use
// of the old key during a rotation's grace, status.credits, the balance, and status.binding, a
// bound key's presenters) from the index's record of use, in batches and
// within a write budget, off the request path: a request only stores a timestamp in memory
// (keyindex.Usage.Touch).
package lastused

import (
	"cmp"
	"context"
	"encoding/json"
	"hash/maphash"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// Writer writes APIKey status.lastUsedAt in batches, off the request path: requests only
// store a timestamp in memory (keyindex.Usage.Touch); every tick this loop patches the keys used
// since their last write, each at most once per interval, and never more than rate writes a
// second. A slow or failing API server delays these writes and nothing else.
//
// The budget bounds the load one replica puts on the API server whatever the number of keys in
// use: past rate×interval active keys, the stalest keys are written first, so every key's
// lastUsedAt is still written, only less often (every active/rate seconds instead of every
// interval). Nothing queues: each flush recomputes what is due from the index, so the backlog
// is at most the number of keys and the writer cannot fall further behind than one round of them.
type Writer struct {
	index    *keyindex.Index
	clock    clock.PassiveClock
	interval time.Duration // at most one write per key per interval
	tick     time.Duration
	rate     float64       // writes per second, the budget
	timeout  time.Duration // per patch
	log      logr.Logger
	// write stores at as the key's status.lastUsedAt, prev (when its Generation is not 0)
	// as its status.previousKeyUse, credits (when not nil) as its status.credits and binding
	// (when not nil) as its status.binding (patchLastUsed in production).
	write func(ctx context.Context, k *keyindex.Key, at time.Time, prev keyindex.PreviousUse, credits *switchboardv1alpha1.APIKeyCreditsStatus, binding *switchboardv1alpha1.APIKeyBindingStatus) error
	// balance reads a key's credits without spending any; nil: none are written.
	balance func(ctx context.Context, p *ratelimit.Policy) (ratelimit.Balance, bool, error)
	// shares are the balances written, for switchboard_api_credit_keys.
	shares creditShares
	// seed breaks ties between equally stale keys differently on each replica, so that
	// replicas over budget do not all pick the same keys.
	seed maphash.Seed
}

// Options configure a Writer.
type Options struct {
	// Clock is the time of the schedule; the real clock when nil.
	Clock clock.PassiveClock
	// Interval is the least time between two writes of one key's lastUsedAt.
	Interval time.Duration
	// Flush is how often used keys are looked for.
	Flush time.Duration
	// WriteRate bounds the writes per second. With more keys in use than WriteRate×Interval,
	// the stalest are written first and each key less often.
	WriteRate float64
	// Logger receives the writes that failed (at verbosity 1; they are retried).
	Logger logr.Logger
	// CreditBalance reads a key's credits, written with its lastUsedAt (keycheck.Checker's).
	CreditBalance func(ctx context.Context, p *ratelimit.Policy) (ratelimit.Balance, bool, error)
}

// New returns a Writer of the use idx records, patching through c.
func New(idx *keyindex.Index, c client.Client, o Options) *Writer {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	u := &Writer{
		index: idx, clock: o.Clock, log: o.Logger, seed: maphash.MakeSeed(),
		interval: o.Interval, tick: o.Flush, rate: o.WriteRate, timeout: 10 * time.Second, balance: o.CreditBalance,
	}
	u.write = func(ctx context.Context, k *keyindex.Key, at time.Time, prev keyindex.PreviousUse, credits *switchboardv1alpha1.APIKeyCreditsStatus, binding *switchboardv1alpha1.APIKeyBindingStatus) error {
		return patchLastUsed(ctx, c, k, at, prev, credits, binding)
	}
	return u
}

// Run writes until ctx is done.
func (u *Writer) Run(ctx context.Context) {
	t := time.NewTicker(u.tick)
	defer t.Stop()
	// One write's worth of burst: writes are spread evenly over the tick, not sent in a spike.
	limit := rate.NewLimiter(rate.Limit(u.rate), 1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			u.flush(ctx, limit)
		}
	}
}

// budget is how many writes one flush may make.
func (u *Writer) budget() int {
	return max(1, int(u.rate*u.tick.Seconds()))
}

// flush writes lastUsedAt for the stalest keys that need it, at most one tick's budget of them,
// paced by limit. Writes are second-granular, like every metav1.Time. A flush ends at the next
// tick even if the API server is slow: what it did not write is due again at the next one.
func (u *Writer) flush(ctx context.Context, limit *rate.Limiter) {
	now := u.clock.Now()
	keys := u.index.Keys()
	plan := u.schedule(keys, now)
	// After the writes, which record the balances they wrote.
	defer u.shares.publish(keys, now)
	lastUsedBacklog.Set(float64(plan.backlog))
	lastUsedStaleness.Set(plan.staleness.Seconds())
	ctx, cancel := context.WithTimeout(ctx, u.tick)
	defer cancel()
	for _, d := range plan.batch {
		if limit != nil && limit.Wait(ctx) != nil {
			return
		}
		u.writeOne(ctx, d)
	}
}

func (u *Writer) writeOne(ctx context.Context, d dueWrite) {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	readAt := u.clock.Now()
	credits := u.credits(ctx, d.key, readAt)
	usage := d.key.Usage()
	binding, seen := bindingStatus(usage, readAt)
	err := u.write(ctx, d.key, d.at, d.prevAt, credits, binding)
	switch {
	case err == nil:
		// Credits are written as counted at readAt, which due compares with the last use.
		writtenAt := u.clock.Now()
		if credits != nil {
			writtenAt = readAt
		}
		usage.MarkWritten(d.used, writtenAt)
		if d.prevAt.Generation != 0 {
			usage.MarkPreviousWritten(d.prev)
		}
		if credits != nil {
			u.shares.record(d.key.UID, credits)
		}
		if binding != nil {
			usage.BindingSeen().MarkWritten(&seen)
		}
		lastUsedWrites.WithLabelValues("ok").Inc()
	case apierrors.IsNotFound(err):
		// Deleted since: nothing to record.
		usage.MarkWritten(d.used, u.clock.Now())
		lastUsedWrites.WithLabelValues("gone").Inc()
	default:
		lastUsedWrites.WithLabelValues("error").Inc()
		u.log.V(1).Info("writing lastUsedAt failed; will retry", "namespace", d.key.Namespace, "name", d.key.Name, "error", err.Error())
	}
}

// credits is k's balance to write with its lastUsedAt, read now (the counts only change when the
// key is used, which is when lastUsedAt is due); nil for a key without credits, or when they
// cannot be read, and then lastUsedAt is written alone.
func (u *Writer) credits(ctx context.Context, k *keyindex.Key, now time.Time) *switchboardv1alpha1.APIKeyCreditsStatus {
	if u.balance == nil {
		return nil
	}
	b, ok, err := u.balance(ctx, k.RateLimit)
	if err != nil {
		u.log.V(1).Info("reading the credits failed; writing lastUsedAt without them", "namespace", k.Namespace, "name", k.Name, "error", err.Error())
	}
	if !ok {
		return nil
	}
	return &switchboardv1alpha1.APIKeyCreditsStatus{Period: b.Period.ID, PeriodEnd: metav1.NewTime(b.Period.End),
		Used: b.Used, Remaining: b.Remaining, ObservedAt: metav1.NewTime(now)}
}

// dueWrite is one key whose status.lastUsedAt should be written.
type dueWrite struct {
	key  *keyindex.Key
	used time.Time // the use to record
	at   time.Time // used, truncated to the second: the value written
	// stored is the newest lastUsedAt known to be in the API server (from the cache or this
	// replica's own last write); zero when none is.
	stored time.Time
	tie    uint64
	// prev is the use of the previous key generation to record with it, and prevAt the value
	// written (truncated to the second); zero Generation: none is due.
	prev, prevAt keyindex.PreviousUse
}

// writePlan is what one flush writes, and what it leaves.
type writePlan struct {
	batch []dueWrite
	// backlog counts the due keys left for a later flush.
	backlog int
	// staleness is the age at now of the oldest stored lastUsedAt among the due keys (of the
	// oldest unwritten use, for a key that has none).
	staleness time.Duration
}

// schedule picks, from keys, the ones due for a write at now and orders them stalest first:
// never written, then by the age of their stored lastUsedAt (counted in whole intervals, so
// that replicas break ties differently), and keeps one flush's budget of them.
func (u *Writer) schedule(keys []*keyindex.Key, now time.Time) writePlan {
	due := make([]dueWrite, 0, len(keys))
	var plan writePlan
	for _, k := range keys {
		d, ok := u.due(k, now)
		if !ok {
			continue
		}
		oldest := d.stored
		if oldest.IsZero() {
			oldest = d.used
		}
		plan.staleness = max(plan.staleness, now.Sub(oldest))
		due = append(due, d)
	}
	slices.SortFunc(due, func(a, b dueWrite) int {
		// Zero (never written) sorts first; then whole intervals of age, oldest first.
		if c := cmp.Compare(u.bucket(a.stored), u.bucket(b.stored)); c != 0 {
			return c
		}
		return cmp.Compare(a.tie, b.tie)
	})
	n := min(len(due), u.budget())
	plan.batch, plan.backlog = due[:n], len(due)-n
	return plan
}

// bucket is t in whole intervals since the epoch; zero for the zero time.
func (u *Writer) bucket(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()/int64(u.interval) + 1
}

// due says whether k's last use should be written at now: it was used after what this replica
// last wrote, this replica has not written it within the interval, and the API server does not
// hold a use (from any replica) within the interval before it; or its previous key was used
// after what the API server holds of that (previousDue), which is written as soon as the
// interval allows, so that the grace it decides is not held open by a stale record.
func (u *Writer) due(k *keyindex.Key, now time.Time) (dueWrite, bool) {
	usage := k.Usage()
	used := usage.LastUsed()
	written := usage.LastWritten()
	prev, prevAt := previousDue(k, usage)
	bindingDue := unwrittenBinding(usage)
	if used.IsZero() || !used.After(written) && prev.Generation == 0 && !u.uncountedUses(k, usage) && !bindingDue {
		return dueWrite{}, false
	}
	if at := usage.WrittenAt(); !at.IsZero() && now.Sub(at) < u.interval {
		return dueWrite{}, false
	}
	at := used.Truncate(time.Second)
	// Another replica (or this one, before a restart) may have written it recently; but not
	// the credits this replica has counted since, which its write carries.
	if !k.LastUsedAt.IsZero() && at.Sub(k.LastUsedAt) < u.interval && prev.Generation == 0 && !u.writesCredits(k) && !bindingDue {
		return dueWrite{}, false
	}
	if at.Before(k.LastUsedAt) {
		// The API server holds a later use, which it keeps: write that again, with prev.
		at = k.LastUsedAt
	}
	if prev.Generation != 0 && at.Before(prevAt.At) {
		// The use of the old key skipped by Touch, under a second after the last one recorded.
		at = prevAt.At
	}
	stored := k.LastUsedAt
	if written.After(stored) {
		stored = written.Truncate(time.Second)
	}
	return dueWrite{key: k, used: used, at: at, stored: stored, tie: maphash.String(u.seed, string(k.UID)), prev: prev, prevAt: prevAt}, true
}

// writesCredits says whether k's writes carry status.credits.
func (u *Writer) writesCredits(k *keyindex.Key) bool {
	return u.balance != nil && k.RateLimit != nil && k.RateLimit.Credits != nil
}

// uncountedUses says that k's credits were last read within a second of its last recorded use:
// Touch records one use a second, so uses after the read may not be recorded, and their credits
// are written once more (after the interval, like any write).
func (u *Writer) uncountedUses(k *keyindex.Key, usage *keyindex.Usage) bool {
	return u.writesCredits(k) && usage.WrittenAt().Before(usage.LastUsed().Add(time.Second))
}

// previousDue is the use of k's previous key generation to write with its lastUsedAt (same
// patch, same budget): one newer than what this replica last wrote and than what the cache
// holds (another replica's write). Every use of the previous key is also a use of the APIKey, so
// the lastUsedAt it goes with is never earlier.
func previousDue(k *keyindex.Key, usage *keyindex.Usage) (use, at keyindex.PreviousUse) {
	use = usage.PreviousUsed()
	if use.Generation == 0 {
		return keyindex.PreviousUse{}, keyindex.PreviousUse{}
	}
	at = keyindex.PreviousUse{Generation: use.Generation, At: use.At.Truncate(time.Second)}
	newer := func(gen int64, t time.Time) bool {
		return at.Generation > gen || at.Generation == gen && at.At.After(t)
	}
	written := usage.PreviousWritten()
	if !newer(written.Generation, written.At.Truncate(time.Second)) || !newer(k.PreviousKeyGeneration, k.PreviousKeyUsedAt) {
		return keyindex.PreviousUse{}, keyindex.PreviousUse{}
	}
	return use, at
}

// bindingStatus is the status.binding of a bound key's presenters as this replica saw them, read
// at now, with the record read (nil, for a key no bound request used).
func bindingStatus(usage *keyindex.Usage, now time.Time) (*switchboardv1alpha1.APIKeyBindingStatus, keyindex.BindingSnapshot) {
	b := usage.BindingSeen()
	if b == nil {
		return nil, keyindex.BindingSnapshot{}
	}
	snap := b.Snapshot()
	// Most recent first: the order a reader wants, and the same record always writes the same.
	slices.SortStableFunc(snap.Presenters, func(a, b keyindex.PresenterUse) int { return b.LastSeen.Compare(a.LastSeen) })
	out := &switchboardv1alpha1.APIKeyBindingStatus{Misuses: snap.Misuses, ObservedAt: metav1.NewTime(now),
		Presenters: make([]switchboardv1alpha1.BindingPresenter, 0, len(snap.Presenters))}
	if !snap.LastMisuse.IsZero() {
		out.LastMisuseAt = &metav1.Time{Time: snap.LastMisuse}
	}
	for _, p := range snap.Presenters {
		bp := switchboardv1alpha1.BindingPresenter{Principal: p.Principal(), Bound: p.Bound, Requests: p.Requests, LastSeen: metav1.NewTime(p.LastSeen)}
		if p.Address.IsValid() {
			bp.Address = p.Address.String()
		}
		out.Presenters = append(out.Presenters, bp)
	}
	return out, snap
}

// unwrittenBinding says requests of a bound key were recorded since its status.binding was last
// written: each is counted, where lastUsedAt records one use a second.
func unwrittenBinding(usage *keyindex.Usage) bool {
	b := usage.BindingSeen()
	return b != nil && b.Unwritten()
}

// patchLastUsed merges status.lastUsedAt, status.previousKeyUse when prev has a generation,
// status.credits and status.binding when given, and nothing else. The status subresource ignores
// metadata, so the patch cannot carry a UID precondition: the writer only patches keys the
// index still holds by UID, which leaves a window of one informer event for an APIKey deleted
// and re-created under the same name to receive its predecessor's last use.
func patchLastUsed(ctx context.Context, c client.Client, k *keyindex.Key, at time.Time, prev keyindex.PreviousUse, credits *switchboardv1alpha1.APIKeyCreditsStatus, binding *switchboardv1alpha1.APIKeyBindingStatus) error {
	var patch struct {
		Status struct {
			LastUsedAt     metav1.Time                               `json:"lastUsedAt"`
			PreviousKeyUse *switchboardv1alpha1.APIKeyPreviousKeyUse `json:"previousKeyUse,omitempty"`
			Credits        *switchboardv1alpha1.APIKeyCreditsStatus  `json:"credits,omitempty"`
			Binding        *switchboardv1alpha1.APIKeyBindingStatus  `json:"binding,omitempty"`
		} `json:"status"`
	}
	patch.Status.LastUsedAt, patch.Status.Credits, patch.Status.Binding = metav1.NewTime(at), credits, binding
	if prev.Generation != 0 {
		patch.Status.PreviousKeyUse = &switchboardv1alpha1.APIKeyPreviousKeyUse{KeyGeneration: prev.Generation, LastUsedAt: metav1.NewTime(prev.At)}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	obj := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
	return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// The writer's metrics: how far it is behind, so that a budget too small for the number of keys
// in use shows on a dashboard instead of as silently stale lastUsedAt.
var (
	lastUsedWrites    = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_api_last_used_writes_total", Help: "Writes of APIKey status.lastUsedAt by result."}, []string{"result"})
	lastUsedBacklog   = metrics.Registered.NewGauge(prometheus.GaugeOpts{Name: "switchboard_api_last_used_backlog", Help: "APIKeys whose status.lastUsedAt is due for a write that the last flush left for later (over the write budget)."})
	lastUsedStaleness = metrics.Registered.NewGauge(prometheus.GaugeOpts{Name: "switchboard_api_last_used_staleness_seconds", Help: "Age of the oldest status.lastUsedAt among the keys due for a write at the last flush: the effective write interval."})
)
