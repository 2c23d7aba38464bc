package keystate

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/renewalinterval"
	"github.com/switchboard-dev/switchboard/internal/controller/keyjournal"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// Params are the operator's settings that decisions depend on.
type Params struct {
	RevealTTL time.Duration
	// ExpiryWarning and UnusedAfter: ExpiringSoon and Unused (lifecycle).
	ExpiryWarning, UnusedAfter time.Duration
	// MinRenewal is the least interval between two renewals of a key (lifecycle's
	// EarliestRenewal), and between two replacements of an APIKey's leaked keys.
	MinRenewal renewalinterval.Minimum
}

// Input is what a policy decides from: the observed state, the facts read from it, the settings.
type Input struct {
	S   *State
	Obs *Observation
	P   Params
}

// Policy decides one thing: whether it settles this reconcile (decided), and with what decision
// (an action, or none when nothing is to be done); one that has nothing to say returns false
// and the chain goes on. Its name says what it decides, in logs and in the tests.
type Policy struct {
	Name   string
	Decide func(in Input) (d Decision, decided bool)
}

// Chain is how a concern decides: small named policies, asked in order; the first that decides
// ends the chain, and says why (as cert-manager's certificates trigger does). The decisions rest
// on what switchboard wrote where tenants and the server cannot write (the hash Secret's record
// of issuance, owner references with UIDs) and on the tenant's spec; a status field is never a
// reason to write anything.
type Chain []Policy

// Evaluate returns the decision of the first policy that decides, named after it; none when no
// policy does.
func (c Chain) Evaluate(in Input) Decision {
	for _, p := range c {
		if d, ok := p.Decide(in); ok {
			d.Policy = p.Name
			return d
		}
	}
	return Decision{}
}

// Decision is what the plan asks of a reconcile, and why.
type Decision struct {
	// Policy names the policy that decided ("" when none did).
	Policy string
	// Why says, for the log, what the policy saw.
	Why string
	// Do is the action to carry out (nil: none; the status is still written).
	Do Action
	// Gen is the key generation an issue issues, or a publication publishes.
	Gen int64
	// Problem is a state the operator cannot repair; the reconcile fails with it.
	Problem string
}

// Action is what a policy asks a reconcile to do. Every write is made so that a repeat, or a
// crash between two writes, is harmless: creates fail on what exists, deletes carry the UID
// (and the resourceVersion seen), patches an optimistic lock.
type Action interface {
	// Do carries the action out on s (s.Key is the APIKey as the reconcile will store its
	// status) and says what it did.
	Do(ctx context.Context, env *Env, s *State, d Decision) (Outcome, error)
}

// Confirmer is an action whose decision rests on what the cache could get wrong: confirm reads
// it from the API server into s (read is false when there was nothing to read) and the plan is
// asked again.
type Confirmer interface {
	Confirm(ctx context.Context, env *Env, s *State) (read bool, err error)
}

// Check is an action that only reads what the cache cannot tell (Confirm), for the plan to be
// asked again with it; it does nothing itself.
type Check interface {
	Confirmer
	IsCheck()
}

// Statusless is an action after which there is no status to write: the APIKey is gone, going,
// or reconciled again at once (its finalizer's or its orphans' watch events wake it).
type Statusless interface{ Statusless() }

// KeyPublisher is an action that writes the status's key fields itself (generation, hint, the
// previous key's grace, the reveal), which the status's mirror then leaves alone.
type KeyPublisher interface{ PublishesKey() }

// Outcome is what an action did, for the status: with the observation, all the conditions are
// set from it.
type Outcome struct {
	// Issuing is the key generation an issue started for (0: none); Issued says it published
	// it, Published that the status's key fields were written from the record (an issue or a
	// publication), LostHint the key a lost delivery Secret held.
	Issuing   int64
	Issued    bool
	Published bool
	LostHint  string
	// Renewed: the generation published was issued by a renewal (set by a publication, which
	// finishes an issue interrupted before its status patch; an issue's decision says it),
	// RenewedUntil when the key it replaced stops being accepted (zero: it already is not).
	Renewed      bool
	RenewedUntil time.Time
	// Conflict says why the issue cannot go on: a Secret it must write is not the APIKey's.
	Conflict string
	// Restored: the status did not say what the hash Secret records, and was put back.
	Restored bool
	// HashFound: the hash Secret was read and is the status's.
	HashFound bool
	// Reveal is what became of the one-time reveal, as a Revealed reason ("" when unchanged).
	Reveal string
	// RevokedAt: the action revoked the key for want of use, at that time.
	RevokedAt time.Time
	// LifeChanged: the record of the key's life was written; its conditions are read again.
	LifeChanged bool
	// LeakRefused: the action recorded a leaked key in the hash Secret, which refuses it;
	// LeakRolled: it rolled (or found it may not roll) the workloads reading its delivery Secret.
	LeakRefused bool
	LeakRolled  bool
	// BindingRecorded: the action wrote the binding record the observation wanted.
	BindingRecorded bool
	// After is how soon to look again (0: when the observation says).
	After time.Duration
}

// Env is what the actions read and write with: the APIKey reconciler's clients (Client reads
// through the cache and writes, APIReader reads the API server wherever a stale cache could
// cost a key), its Recorder (Events carry the key's hint, never the key), the Journal of key
// events, and its settings.
type Env struct {
	Client          client.Client
	APIReader       client.Reader
	Recorder        events.EventRecorder
	Journal         *keyjournal.Journal
	SystemNamespace string
	KeyPrefix       string
	RevealTTL       time.Duration
}

// StaleRetry is how soon a reconcile that found the cache behind the API server runs again.
const StaleRetry = time.Second

// ConsumersRecheck is how soon a key reads again the pods of its namespace that consume its
// Secret (grace's evidence, binding's consumers): every consumersResync when they are watched
// (internal/controller/apikey/podwatch wakes the key on a change at once; this is for one
// missed), every consumersRetry when they are not (refused, or the watcher full).
func ConsumersRecheck(watched bool) time.Duration {
	if watched {
		return consumersResync
	}
	return consumersRetry
}

const (
	consumersRetry  = 30 * time.Second
	consumersResync = 10 * time.Minute
)

// ConflictRetry is how often an APIKey whose delivery Secret is someone else's is looked at
// again: that Secret is not in the cache (it lacks switchboard's label), so no event wakes us.
const ConflictRetry = time.Minute

// ErrStale says the API server holds another version of the APIKey than the one observed.
var ErrStale = errors.New("the cache is behind the API server")

// Patch writes obj as change leaves it, from obj as it was read, with its resourceVersion as an
// optimistic lock: a write decided on an outdated read fails rather than undo another's.
func (e *Env) Patch(ctx context.Context, obj client.Object, change func()) error {
	before := obj.DeepCopyObject().(client.Object)
	change()
	return e.Client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// LiveKey reads the APIKey from the API server into s (nil when it is gone); a version other
// than the cache's makes the reconcile stale (ErrStale).
func (e *Env) LiveKey(ctx context.Context, s *State) error {
	key := &switchboardv1alpha1.APIKey{}
	switch err := e.APIReader.Get(ctx, s.Name, key); {
	case apierrors.IsNotFound(err):
		key = nil
	case err != nil:
		return fmt.Errorf("reading APIKey %s: %w", s.Name, err)
	case s.Key != nil && key.ResourceVersion != s.Key.ResourceVersion:
		// Another version of the APIKey than the one observed: decide from neither.
		return ErrStale
	}
	s.Key, s.Confirmed.Key = key, true
	return nil
}

// LiveHash reads the APIKey's hash Secret from the API server into s; none when the APIKey is
// gone (LiveKey found it deleted): the plan then sees no key to act on.
func (e *Env) LiveHash(ctx context.Context, s *State) (err error) {
	if s.Key == nil {
		s.Hash, s.Confirmed.Hash = nil, true
		return nil
	}
	s.Hash, err = e.LiveSecret(ctx, client.ObjectKey{Namespace: e.SystemNamespace, Name: keysecret.HashName(s.Key.UID)})
	s.Confirmed.Hash = true
	return err
}

// LiveKeyAndHash reads the APIKey and its hash Secret from the API server into s (read: true).
func (e *Env) LiveKeyAndHash(ctx context.Context, s *State) (read bool, err error) {
	if err := e.LiveKey(ctx, s); err != nil {
		return false, err
	}
	return true, e.LiveHash(ctx, s)
}

// LiveSecret reads a Secret from the API server; nil when there is none.
func (e *Env) LiveSecret(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := e.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	return secret, nil
}

// HashSecrets selects the hash Secrets of systemNamespace.
func HashSecrets(systemNamespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == systemNamespace && o.GetLabels()[keysecret.LabelComponent] == keysecret.ComponentHash
	})
}

// APIKeyOf maps a hash Secret to the APIKey its labels name (in the system namespace, which
// tenants cannot write).
func APIKeyOf(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	ns, name := l[keysecret.LabelAPIKeyNamespace], l[keysecret.LabelAPIKeyName]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// DeleteRevealSecret deletes secret as it was read: same UID, same resourceVersion, so one
// that changed since is not deleted on an outdated judgement (the next reconcile looks again).
func (e *Env) DeleteRevealSecret(ctx context.Context, secret *corev1.Secret) error {
	uid, rv := secret.UID, secret.ResourceVersion
	err := e.Client.Delete(ctx, secret, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting reveal Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}
