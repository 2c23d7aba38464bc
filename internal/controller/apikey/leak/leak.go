// Package leak is the response to a leaked APIKey key, a concern of its controller: a
// LeakReport in the system namespace (written there by switchboard's receiver of GitHub's
// secret scanning reports, where no tenant can write) names a key by its hash; the APIKey whose
// hash Secret holds that hash has it refused at once, recorded in the hash Secret (the server
// refuses the hash from then on), a leaked current key is replaced as a renewal would, with no
// grace (at most once per minimum renewal interval), and the workloads reading its delivery
// Secret are rolled. The LeakReport's own reconciler reports on it and deletes it in time. A
// LeakReport anywhere else is never read: the operator caches them in the system namespace only.
package leak

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/issuing"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/workloads"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/metrics"
)

// Policies answer a leak: refused at once, and replaced with no grace, before anything else of
// the key's is done; then the workloads reading the replaced key's Secret are rolled.
var Policies = keystate.Chain{
	{Name: "Leaked", Decide: leaked},
	{Name: "LeakRollout", Decide: leakRollout},
}

// Observe wakes the reconcile when a leaked key's held replacement is due (leakOf).
func Observe(s *keystate.State, _ keystate.Params, obs *keystate.Observation) {
	if obs.Hash != keystate.HashFound {
		return
	}
	if l, ok := keysecret.LeakOf(s.Hash); ok && s.Now.Before(l.ReplaceAfter) {
		obs.Wake.At(l.ReplaceAfter.Sub(s.Now))
	}
}

// HashIndex indexes the operator's cached hash Secrets by every hash they know of: the
// current key's, the previous key's and the last leaked key's (keysecret.HashesOf).
const HashIndex = "switchboard.dev/key-hash"

// ReasonKeyLeaked is the Event reason of a key refused because a verified report said it leaked.
const ReasonKeyLeaked = "KeyLeaked"

// keysLeaked counts the keys refused for a leak, by the report's source (two values) and what
// was done (leakActions). Where the key was found is in the Event and the Leaked condition: a
// URL is no label.
var keysLeaked = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_operator_keys_leaked_total", Help: "Keys refused because a verified report (a LeakReport) said they leaked, by the report's source and what was done: replaced (refused at once), replaced_after_overlap (spec.leakOverlap), replacement_held (refused at once, replaced once the minimum interval since the APIKey's last leak replacement has passed), refused (no replacement: a previous key in its grace, or nothing to replace it with)."}, []string{"source", "action"})

// The actions of keysLeaked.
const (
	leakActionReplaced        = "replaced"
	leakActionReplacedOverlap = "replaced_after_overlap"
	leakActionRefused         = "refused"
	leakActionHeld            = "replacement_held"
)

// leakRollouts counts the rollouts of the workloads reading a leaked delivered key's Secret,
// by outcome (rolled, none_found, not_opted_in, partly_allowed, failed); workloadsRolled counts
// the workloads restarted.
var (
	leakRollouts    = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_operator_leak_rollouts_total", Help: "Rollouts of the workloads reading a leaked delivered key's Secret, by outcome: rolled, none_found, not_opted_in (the namespace granted nothing), partly_allowed, failed (retried)."}, []string{"outcome"})
	workloadsRolled = metrics.Registered.NewCounter(prometheus.CounterOpts{Name: "switchboard_operator_leak_workloads_rolled_total", Help: "Workloads (Deployments, StatefulSets, DaemonSets) restarted because the delivery Secret they read held a leaked key, now replaced."})
)

// Hashes is the HashIndex value of a hash Secret of the system namespace.
func Hashes(systemNamespace string) client.IndexerFunc {
	return func(o client.Object) []string {
		s, ok := o.(*corev1.Secret)
		if !ok || s.Namespace != systemNamespace || s.Labels[keysecret.LabelComponent] != keysecret.ComponentHash {
			return nil
		}
		return keysecret.HashesOf(s)
	}
}

// isLeakReport says whether report is one the operator believes: in the system namespace, and
// named for the hash it reports (as the receiver names them), so one key has one report.
func isLeakReport(report *switchboardv1alpha1.LeakReport, systemNamespace string) bool {
	return report.Namespace == systemNamespace && report.Name == switchboardv1alpha1.LeakReportName(report.Spec.KeyHash)
}

// ObserveReports reads into s, from the cache, the LeakReports of the hashes the hash Secret
// knows of (never empty: keysecret.HashesOf) that the operator believes.
func ObserveReports(ctx context.Context, env *keystate.Env, s *keystate.State) error {
	s.Leaks = nil
	if s.Hash == nil {
		return nil
	}
	for _, sum := range keysecret.HashesOf(s.Hash) {
		report := &switchboardv1alpha1.LeakReport{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.SystemNamespace, Name: switchboardv1alpha1.LeakReportName(sum)}, report)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("reading the leak report of a hash of %s: %w", s.Hash.Name, err)
		}
		if err != nil || !isLeakReport(report, env.SystemNamespace) || report.Spec.KeyHash != sum {
			continue
		}
		if s.Leaks == nil {
			s.Leaks = map[string]*switchboardv1alpha1.LeakReport{}
		}
		s.Leaks[sum] = report
	}
	return nil
}

// leakToAct is what a leak asks of the key: the hash reported and not yet refused (previous:
// it is the previous key's, in grace), or a refused current key still to replace.
type leakToAct struct {
	report   *switchboardv1alpha1.LeakReport
	hash     string
	previous bool
	// replace: the current key leaked and is (or is about to be) refused; a new one is issued,
	// once the APIKey's last replacement of a leaked key is interval old (nextReplacement).
	replace  bool
	interval time.Duration
}

// leakOf reads what the leak reports of s ask (false: nothing). A refused current key whose
// replacement is held (keysecret.Leak.ReplaceAfter) asks nothing until then: Observe wakes
// the reconcile at that instant.
func leakOf(s *keystate.State, obs *keystate.Observation, p keystate.Params) (leakToAct, bool) {
	if s.Hash == nil {
		return leakToAct{}, false
	}
	current, previous := string(s.Hash.Data[keysecret.DataHash]), string(s.Hash.Data[keysecret.DataPreviousHash])
	recorded, _ := keysecret.LeakOf(s.Hash)
	canReplace := !obs.Expired && obs.Rec != nil
	// A leaked key replaced with an overlap stays the previous key until the overlap ends,
	// when the server stops accepting it and GraceEnded drops it.
	overlapping := recorded.Hash == previous && s.Now.Before(recorded.AcceptedUntil)
	interval := leakReplacementInterval(s.Key, p)
	switch {
	case previous != "" && s.Leaks[previous] != nil && !overlapping:
		return leakToAct{report: s.Leaks[previous], hash: previous, previous: true}, true
	case current != "" && s.Leaks[current] != nil && recorded.Hash != current:
		return leakToAct{report: s.Leaks[current], hash: current, replace: canReplace, interval: interval}, true
	case current != "" && recorded.Hash == current && canReplace && !s.Now.Before(recorded.ReplaceAfter):
		// Refused by an earlier reconcile that did not get to issue the replacement, or held
		// until now.
		return leakToAct{report: s.Leaks[current], hash: current, replace: true, interval: interval}, true
	}
	return leakToAct{}, false
}

// leakReplacementInterval is the least time between two replacements of an APIKey's leaked
// keys: the platform's minimum interval between renewals for its lifetime. Each replacement
// writes the key's Secrets and rolls the workloads that read it, so a tenant that publishes
// every new key it gets cannot make the operator do so faster than its renewals would.
func leakReplacementInterval(key *switchboardv1alpha1.APIKey, p keystate.Params) time.Duration {
	var lifetime time.Duration
	if key.Spec.Lifetime != nil {
		lifetime = key.Spec.Lifetime.Duration
	}
	return p.MinRenewal.Of(lifetime)
}

// nextReplacement is when the replacement of a leaked current key may be issued, reported at
// now, given the APIKey's earlier leak record: at once (replaceAfter zero), unless its last
// replacement of a leaked key was less than interval before; last is the instant of this one,
// which the next leak counts from.
func nextReplacement(earlier keysecret.Leak, now time.Time, interval time.Duration) (replaceAfter, last time.Time) {
	now = now.Truncate(time.Second)
	if earlier.LastReplacement.IsZero() || interval <= 0 {
		return time.Time{}, now
	}
	due := earlier.LastReplacement.Add(interval)
	if t := due.Truncate(time.Second); t.Before(due) {
		due = t.Add(time.Second) // recorded to the second, never sooner than the interval
	}
	if !due.After(now) {
		return time.Time{}, now
	}
	return due, due
}

// leaked: a key reported leaked is refused at once, recorded in its hash Secret, before any
// renewal, grace or reveal policy: a leaked current key is replaced with no grace (as a renewal
// would, into its delivery Secret, or a new reveal), a leaked previous key's grace ends now.
// A current key that leaks within the minimum interval of the APIKey's last replacement of a
// leaked key is refused as well, but replaced only once the interval has passed.
func leaked(in keystate.Input) (keystate.Decision, bool) {
	l, ok := leakOf(in.S, in.Obs, in.P)
	if !ok {
		return keystate.Decision{}, false
	}
	d := keystate.Decision{Do: refuseLeaked{leak: l}, Why: "the current key was reported leaked"}
	switch {
	case l.previous:
		d.Why = "the previous key, in its grace period, was reported leaked"
	case l.replace:
		d.Gen = in.Obs.Rec.Generation + 1
	}
	return d, true
}

// refuseLeaked records the leak in the hash Secret (the server refuses the hash from then on,
// or from the end of spec.leakOverlap), then, for a current key, issues its replacement with no
// grace (or that overlap), and rolls the workloads that read a delivery Secret.
type refuseLeaked struct{ leak leakToAct }

// leakOverlap is how long a leaked current key of s stays accepted once it is replaced:
// spec.leakOverlap for a delivered key replaced at once, 0 (refused at once) otherwise.
func leakOverlap(s *keystate.State, l leakToAct, held bool) time.Duration {
	if !l.replace || held || l.previous || s.Key.Spec.LeakOverlap == nil || !keystate.Delivered(s.Key, s.Record()) {
		return 0
	}
	return s.Key.Spec.LeakOverlap.Duration
}

// Confirm: the hash Secret as the API server has it decides, or a cache behind the last
// replacement would replace the key twice.
func (refuseLeaked) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	if err := env.LiveHash(ctx, s); err != nil {
		return false, err
	}
	return true, ObserveReports(ctx, env, s)
}

func (a refuseLeaked) Do(ctx context.Context, env *keystate.Env, s *keystate.State, d keystate.Decision) (keystate.Outcome, error) {
	key, hash, l := s.Key, s.Hash, a.leak
	var out keystate.Outcome
	before := hash.DeepCopy()
	earlier, _ := keysecret.LeakOf(hash)
	switch {
	case earlier.Hash == l.hash:
		if l.previous {
			// Recorded, yet still kept as the previous key: it goes now.
			keysecret.DropPrevious(hash)
		}
	case l.previous && earlier.Hash != "" && earlier.Hash == string(hash.Data[keysecret.DataHash]):
		// The current key leaked and is not replaced yet: its record is what refuses it, and
		// stays. The previous key needs no record: dropped, it is refused as any unknown key.
		keysecret.DropPrevious(hash)
		log.FromContext(ctx).Info("refused the leaked previous key; the current key's leak stays recorded")
	default:
		gen := keysecret.Generation(hash)
		if l.previous {
			gen--
		}
		rec := keysecret.Leak{Hash: l.hash, At: s.Now.Truncate(time.Second), Generation: gen, LastReplacement: earlier.LastReplacement}
		if l.report != nil {
			rec.Hint, rec.Source, rec.URL = l.report.Spec.KeyHint, l.report.Spec.Source, l.report.Spec.URL
		}
		if key.Status.LastUsedAt != nil {
			rec.LastUsedAt = key.Status.LastUsedAt.Time
		}
		if l.replace {
			rec.ReplaceAfter, rec.LastReplacement = nextReplacement(earlier, s.Now, l.interval)
		}
		if d := leakOverlap(s, l, s.Now.Before(rec.ReplaceAfter)); d > 0 {
			// Truncated, so never later than asked: the server honours it to the second.
			rec.AcceptedUntil = s.Now.Add(d).Truncate(time.Second)
		}
		if (l.replace || l.previous) && keystate.Delivered(key, s.Record()) {
			// Its consumers are rolled onto the current key once there is one to roll onto.
			rec.Rollout = keysecret.RolloutPending
		}
		keysecret.SetLeaked(hash, rec)
		out.LeakRefused = true
	}
	if !equality.Semantic.DeepEqual(before.Data, hash.Data) {
		if err := env.Client.Patch(ctx, hash, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return keystate.Outcome{}, fmt.Errorf("recording the leaked key in hash Secret %s/%s: %w", hash.Namespace, hash.Name, err)
		}
	}
	recorded, _ := keysecret.LeakOf(hash)
	held := l.replace && s.Now.Before(recorded.ReplaceAfter)
	if out.LeakRefused {
		source, action := "", leakActionRefused
		if l.report != nil {
			source = l.report.Spec.Source
		}
		switch {
		case held:
			action = leakActionHeld
		case l.replace && !recorded.AcceptedUntil.IsZero():
			action = leakActionReplacedOverlap
		case l.replace:
			action = leakActionReplaced
		}
		keysLeaked.WithLabelValues(source, action).Inc()
		log.FromContext(ctx).Info("refused the leaked key", "previous", l.previous, "acceptedUntil", recorded.AcceptedUntil,
			"replaceAfter", recorded.ReplaceAfter)
	}
	if held {
		// Refused now; replaced once the interval has passed (Observe wakes it then).
		out.After = recorded.ReplaceAfter.Sub(s.Now)
		return out, nil
	}
	if l.replace {
		// With an overlap, the leaked key becomes the previous key until its recorded end:
		// after a crash, a later run gives it what is left of it, never more.
		var grace time.Duration
		if !recorded.AcceptedUntil.IsZero() {
			grace = max(recorded.AcceptedUntil.Sub(s.Now), 0)
		}
		issued, err := issuing.Issue{Grace: grace}.Do(ctx, env, s, d)
		issued.LeakRefused = out.LeakRefused
		if err != nil || !issued.Issued {
			return issued, err
		}
		out = issued
	}
	if recorded.Rollout != keysecret.RolloutPending || !keystate.Delivered(key, s.Record()) || keysecret.Generation(hash) <= recorded.Generation {
		return out, nil
	}
	rolled, err := rollLeaked{}.Do(ctx, env, s, d)
	if err != nil {
		// The key is refused and replaced, which the status must say; LeakRollout retries.
		log.FromContext(ctx).Error(err, "rolling the workloads that read the delivery Secret; retrying")
		out.After = keystate.StaleRetry
		return out, nil
	}
	out.LeakRolled = rolled.LeakRolled
	return out, nil
}

// leakRollout: the workloads reading a leaked key's delivery Secret are still to be rolled,
// now that it holds the replacement (a run of refuseLeaked stopped before it, or failed at it).
func leakRollout(in keystate.Input) (keystate.Decision, bool) {
	s, rec := in.S, in.Obs.Rec
	if s.Hash == nil || in.Obs.Expired || in.Obs.Conflict != "" || !keystate.Delivered(s.Key, rec) {
		return keystate.Decision{}, false
	}
	l, ok := keysecret.LeakOf(s.Hash)
	if !ok || l.Rollout != keysecret.RolloutPending || rec.Generation <= l.Generation {
		return keystate.Decision{}, false
	}
	return keystate.Decision{Do: rollLeaked{}, Why: "the workloads reading the leaked key's delivery Secret are not rolled yet"}, true
}

// rollLeaked rolls the workloads of the APIKey's namespace that read its delivery Secret, with
// the rights the namespace granted (none: not opted in), and records what it did in the leak
// record, so that it is done once.
type rollLeaked struct{}

// Confirm: a cache behind the record would roll the workloads twice.
func (rollLeaked) Confirm(ctx context.Context, env *keystate.Env, s *keystate.State) (bool, error) {
	return true, env.LiveHash(ctx, s)
}

func (rollLeaked) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	key, hash := s.Key, s.Hash
	res, err := workloads.Roll(ctx, env.APIReader, env.Client, key.Namespace, key.Spec.SecretName, s.Now)
	if err != nil {
		leakRollouts.WithLabelValues("failed").Inc()
		return keystate.Outcome{}, fmt.Errorf("rolling the workloads that read Secret %s/%s: %w", key.Namespace, key.Spec.SecretName, err)
	}
	l, _ := keysecret.LeakOf(hash)
	l.Rollout = res.String()
	if err := env.Patch(ctx, hash, func() { keysecret.SetLeaked(hash, l) }); err != nil {
		return keystate.Outcome{}, fmt.Errorf("recording the rollout in hash Secret %s/%s: %w", hash.Namespace, hash.Name, err)
	}
	counted := "rolled"
	switch {
	case res.NotOptedIn():
		counted = "not_opted_in"
	case len(res.Forbidden) > 0:
		counted = "partly_allowed"
	case len(res.Rolled) == 0:
		counted = "none_found"
	}
	leakRollouts.WithLabelValues(counted).Inc()
	workloadsRolled.Add(float64(len(res.Rolled)))
	log.FromContext(ctx).Info("rolled the workloads that read the delivery Secret of a leaked key", "secret", key.Spec.SecretName,
		"rolled", res.Rolled, "forbidden", res.Forbidden)
	return keystate.Outcome{LeakRolled: true}, nil
}

// ReportToAPIKey maps a LeakReport of systemNamespace to the APIKey whose hash Secret knows its
// hash (HashIndex, read with c); the hash Secret's labels, in the system namespace where tenants
// cannot write, name it.
func ReportToAPIKey(c client.Reader, systemNamespace string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		report, ok := o.(*switchboardv1alpha1.LeakReport)
		if !ok || !isLeakReport(report, systemNamespace) {
			return nil
		}
		var hashes corev1.SecretList
		if err := c.List(ctx, &hashes, client.InNamespace(systemNamespace), client.MatchingFields{HashIndex: report.Spec.KeyHash}); err != nil {
			log.FromContext(ctx).Error(err, "listing the hash Secrets of a leak report", "leakReport", report.Name)
			return nil
		}
		var out []reconcile.Request
		for i := range hashes.Items {
			out = append(out, keystate.APIKeyOf(ctx, &hashes.Items[i])...)
		}
		return out
	}
}
