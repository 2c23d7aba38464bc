package keyindex

import (
	"errors"

	"k8s.io/apimachinery/pkg/types"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// An APIKey that names an APIKeyCreditPool (spec.creditPool) spends the pool's credits with
// every other key naming it: its policy keeps its own rate and counts its credits under the
// pool's UID (ratelimit.NewPoolCreditPolicy). As with roles, the index keeps each pool read
// (the feed reads it once per change) and which keys name it, so that a pool's change builds
// again the policies of those keys alone, and no request reads a pool. A key names a pool of
// its own namespace only: the namespace is the key's, never a tenant's choice.

// CreditPool is what the index takes from an APIKeyCreditPool: its UID, which names its count,
// and its credits as the limiter reads them.
type CreditPool struct {
	uid     types.UID
	credits ratelimit.Credits
	// costs and chargeOnSuccess are its credits' costs and charge, which its keys follow.
	costs           *permission.Costs
	chargeOnSuccess bool
}

// ReadCreditPool reads an APIKeyCreditPool, without the index: a cache transform reads it once
// per watch event. Its credits are read by the code that reads an APIKey's (Credits,
// readCosts), so that they mean to a pool exactly what they mean to a key, erring as they do
// on the side of the keys doing less; the error says what was read so.
func ReadCreditPool(p *switchboardv1alpha1.APIKeyCreditPool) (*CreditPool, error) {
	what := "APIKeyCreditPool " + p.Namespace + "/" + p.Name
	c, err := Credits(&p.Spec.Credits, string(p.UID))
	if err != nil {
		err = errorf("%s: %v", what, err)
	}
	pool := &CreditPool{uid: p.UID, credits: c}
	var cerr error
	pool.costs, pool.chargeOnSuccess, cerr = readCosts(&p.Spec.Credits, what)
	return pool, errors.Join(err, cerr)
}

// PutCreditPool adds or replaces the APIKeyCreditPool namespace/name (nil: one whose credits
// cannot be read, which no key may spend), and publishes again every key that names it.
func (x *Index) PutCreditPool(namespace, name string, pool *CreditPool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.republishLocked(x.pools.set(namespace, name, pool, pool != nil), x.spendPoolLocked)
}

// DeleteCreditPool removes the APIKeyCreditPool namespace/name: the keys that name it have no
// credits to spend until it is back (a new pool, a new UID, a new count).
func (x *Index) DeleteCreditPool(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.republishLocked(x.pools.set(namespace, name, nil, false), x.spendPoolLocked)
}

// withPoolLocked is key as published: key itself when it names no pool, else a copy that spends
// the pool's credits, and which the index records as naming it.
func (x *Index) withPoolLocked(key *Key) *Key {
	if key.CreditPool == "" {
		return key
	}
	x.pools.link(key.Namespace, key.UID, key.CreditPool)
	return x.spendPoolLocked(key)
}

// spendPoolLocked is a copy of key whose RateLimit is its own rate with its pool's credits, or,
// when the pool does not exist, its own rate alone and CreditPoolMissing: fail closed, since a
// key with no pool to count on would otherwise have no credits to stop it.
func (x *Index) spendPoolLocked(key *Key) *Key {
	out := *key
	out.RateLimit, out.CreditPoolMissing = key.ownRate, true
	pool, _ := x.pools.get(key.Namespace, key.CreditPool)
	if pool == nil {
		return &out
	}
	var rate ratelimit.Limit
	if key.ownRate != nil {
		rate = key.ownRate.Limit
	}
	p, err := ratelimit.NewPoolCreditPolicy(string(key.UID), string(pool.uid), rate, pool.credits)
	if err != nil { // ReadCreditPool read credits within bounds: not expected, and failing closed
		return &out
	}
	out.RateLimit, out.CreditPoolMissing = p, false
	out.Costs, out.ChargeOnSuccess = pool.costs, pool.chargeOnSuccess
	return &out
}

// unlinkPoolLocked forgets that key (nil: none) names its pool.
func (x *Index) unlinkPoolLocked(key *Key) {
	if key != nil && key.CreditPool != "" {
		x.pools.unlink(key.Namespace, key.UID, key.CreditPool)
	}
}
