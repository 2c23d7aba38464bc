package keyindex

import (
	"errors"
	"net/netip"
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/server/ratelimit"
)

// setPolicy reads what k may do beyond being valid into key. The CRD's schema refuses bad
// values, so an error here means an APIKey written past it (an older CRD, say); each then errs
// on the side of the key doing less: a rate limit out of bounds is brought within them, a
// source range that does not parse admits nobody, and permissions that do not compile allow
// nothing.
func setPolicy(key *Key, k *switchboardv1alpha1.APIKey) error {
	var errs []error
	if rl := k.Spec.RateLimit; rl != nil {
		l := ratelimit.Limit{Requests: int64(rl.Requests), Period: rl.Period.Duration, Burst: int64(rl.EffectiveBurst())}
		if err := l.Validate(); err != nil {
			errs = append(errs, errorf("APIKey %s/%s: rateLimit: %v; enforcing the nearest limit within bounds", k.Namespace, k.Name, err))
			l = nearest(l)
		}
		if p, err := ratelimit.NewPolicy(string(k.UID), l); err != nil {
			errs = append(errs, errorf("APIKey %s/%s: rateLimit: %v", k.Namespace, k.Name, err))
		} else {
			key.RateLimit = p
		}
	}
	if key.CreditPool = k.Spec.CreditPool; key.CreditPool != "" {
		// The pool's credits are joined by the index (pools.go): the key's own are not read,
		// which the CRD refuses beside a pool.
		key.ownRate = key.RateLimit
		if k.Spec.Credits != nil {
			errs = append(errs, errorf("APIKey %s/%s: credits and creditPool: spending the pool's credits alone", k.Namespace, k.Name))
		}
	} else {
		errs = append(errs, setCredits(key, k))
	}
	if len(k.Spec.AllowedSourceRanges) > 0 {
		key.SourcesRestricted = true
		for _, c := range k.Spec.AllowedSourceRanges {
			p, err := netip.ParsePrefix(string(c))
			if err != nil {
				errs = append(errs, errorf("APIKey %s/%s: allowedSourceRanges: %q is not a CIDR; it admits nobody", k.Namespace, k.Name, c))
				continue
			}
			key.SourceRanges = append(key.SourceRanges, clientaddr.Range(p))
		}
	}
	for _, a := range k.Spec.Audiences {
		key.Audiences = append(key.Audiences, string(a))
	}
	rules, err := permission.Compile(k.Spec.Permissions)
	if err != nil {
		errs = append(errs, errorf("APIKey %s/%s: %v; the key is allowed nothing", k.Namespace, k.Name, err))
		rules = &permission.Rules{}
	} else { // the index joins the roles' rules (roles.go); not to own rules allowing nothing
		key.permissionRoles = k.Spec.PermissionRoles
	}
	key.Permissions, key.ownPermissions = rules, rules
	return errors.Join(errs...)
}

// nearest brings l within the bounds of a policy.
func nearest(l ratelimit.Limit) ratelimit.Limit {
	l.Requests = min(max(l.Requests, 1), ratelimit.MaxRequests)
	l.Period = min(max(l.Period.Truncate(time.Second), ratelimit.MinPeriod), ratelimit.MaxPeriod)
	l.Burst = min(max(l.Burst, 1), l.Requests)
	return l
}

// AllowsSource reports whether the key may be used from addr: always when it has no source
// ranges, else when one of them contains addr. An address that could not be read is allowed
// only where there are no ranges.
func (k *Key) AllowsSource(addr netip.Addr) bool {
	if !k.SourcesRestricted {
		return true
	}
	for _, p := range k.SourceRanges {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// AllowsAudience reports whether the key may be used for audience: always when it names no
// audiences, else when audience is one of them. At most 16 short names: a scan is the fastest.
func (k *Key) AllowsAudience(audience string) bool {
	if len(k.Audiences) == 0 {
		return true
	}
	for _, a := range k.Audiences {
		if a == audience {
			return true
		}
	}
	return false
}
