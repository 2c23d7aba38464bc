package permission

import (
	"fmt"
	"net/url"
	"strings"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Costs are a key's compiled spec.credits.costs: what a request costs, by the first cost whose
// route matches it, matched as permission rules match (the same templates, so a cost and a
// permission written alike mean the same requests).
type Costs struct {
	rules   []rule
	credits []int64
	// most is what a request costs whose route cannot be told (a path that is not clean, a
	// method the gateway did not send): the largest cost, never less than the default, so what
	// cannot be told is never cheaper than what can.
	most int64
}

// defaultCost is what a request no cost matches costs.
const defaultCost = 1

// CompileCosts compiles specs, or says which is wrong and why; nil when there are none. When
// they do not compile, the Costs it returns charge every request the largest of them (within
// bounds): what a key whose costs the server cannot read gets, never a cheaper answer.
func CompileCosts(specs []switchboardv1alpha1.CreditCost) (*Costs, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	cs := &Costs{rules: make([]rule, len(specs)), credits: make([]int64, len(specs)), most: defaultCost}
	for i := range specs {
		cs.most = max(cs.most, min(specs[i].Credits, switchboardv1alpha1.CreditsMaxCost))
	}
	dearest := &Costs{most: cs.most}
	if len(specs) > switchboardv1alpha1.MaxCreditCosts {
		return dearest, fmt.Errorf("at most %d costs, not %d", switchboardv1alpha1.MaxCreditCosts, len(specs))
	}
	for i := range specs {
		s := &specs[i]
		if s.Credits < 0 || s.Credits > switchboardv1alpha1.CreditsMaxCost {
			return dearest, fmt.Errorf("costs[%d]: credits must be from 0 to %d, not %d", i, switchboardv1alpha1.CreditsMaxCost, s.Credits)
		}
		r, err := compileRule(&switchboardv1alpha1.PermissionRule{
			Effect: switchboardv1alpha1.PermissionAllow, Methods: s.Methods, Paths: s.Paths, Audiences: s.Audiences})
		if err != nil {
			return dearest, fmt.Errorf("costs[%d]: %w", i, err)
		}
		cs.rules[i], cs.credits[i] = r, s.Credits
	}
	return cs, nil
}

// Of is what req costs. It does not allocate unless the path is percent-encoded.
func (cs *Costs) Of(req Request) int64 {
	if cs == nil {
		return defaultCost
	}
	path, unclean := matchedPath(req.Path)
	if unclean || req.Method == "" || len(cs.rules) == 0 {
		return cs.most
	}
	for i := range cs.rules {
		if cs.rules[i].matches(&req, path, false, nil) {
			return cs.credits[i]
		}
	}
	return defaultCost
}

// matchedPath is path as rules match it: without its query, percent-decoded (as the server
// behind a gateway reads it: /v1/conn%65ctions is /v1/connections); unclean when its segments
// could be read otherwise upstream.
func matchedPath(path string) (string, bool) {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	unclean := !clean(path)
	if !unclean && strings.IndexByte(path, '%') >= 0 {
		decoded, err := url.PathUnescape(path)
		path, unclean = decoded, err != nil
	}
	return path, unclean
}
