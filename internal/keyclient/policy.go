package keyclient

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// Policy is what a key may do beyond being valid, as a view's flags or form give it: the
// APIKey's spec.rateLimit, spec.allowedSourceRanges and spec.audiences. The views parse their
// input with ParseRateLimit, ParseSourceRanges and ParseAudiences, which refuse what the API
// server would, with messages in the views' terms; the API server's schema stays the judge.
type Policy struct {
	// RateLimit is nil for no limit.
	RateLimit *switchboardv1alpha1.APIKeyRateLimit
	// AllowedSourceRanges is empty for anywhere.
	AllowedSourceRanges []switchboardv1alpha1.CIDR
	// Audiences is empty for every audience.
	Audiences []switchboardv1alpha1.Audience
}

// Apply sets p on spec.
func (p Policy) Apply(spec *switchboardv1alpha1.APIKeySpec) {
	spec.RateLimit = p.RateLimit
	spec.AllowedSourceRanges = p.AllowedSourceRanges
	spec.Audiences = p.Audiences
}

// PolicyOf is the policy of key.
func PolicyOf(key *switchboardv1alpha1.APIKey) Policy {
	return Policy{RateLimit: key.Spec.RateLimit, AllowedSourceRanges: key.Spec.AllowedSourceRanges, Audiences: key.Spec.Audiences}
}

// ParseRateLimit reads a rate written REQUESTS/PERIOD ("100/1m", "10/1s", "5000/1h") and a
// burst (0 for none: the burst is then the requests). An empty rate is no limit, and then
// burst must be 0.
func ParseRateLimit(rate string, burst int) (*switchboardv1alpha1.APIKeyRateLimit, error) {
	rate = strings.TrimSpace(rate)
	if rate == "" {
		if burst != 0 {
			return nil, fmt.Errorf("a burst needs a rate limit (e.g. 100/1m)")
		}
		return nil, nil
	}
	reqs, per, ok := strings.Cut(rate, "/")
	if !ok {
		return nil, fmt.Errorf("rate limit %q is not REQUESTS/PERIOD, e.g. 100/1m", rate)
	}
	n, err := strconv.Atoi(strings.TrimSpace(reqs))
	if err != nil || n < 1 || n > switchboardv1alpha1.RateLimitMaxRequests {
		return nil, fmt.Errorf("rate limit %q: the requests must be a whole number from 1 to %d", rate, switchboardv1alpha1.RateLimitMaxRequests)
	}
	period, err := time.ParseDuration(strings.TrimSpace(per))
	if err != nil || period%time.Second != 0 {
		return nil, fmt.Errorf("rate limit %q: the period must be whole seconds written like 30s, 1m, 1h or 1m30s", rate)
	}
	if period < switchboardv1alpha1.RateLimitMinPeriod || period > switchboardv1alpha1.RateLimitMaxPeriod {
		return nil, fmt.Errorf("rate limit %q: the period must be from 1s to 24h", rate)
	}
	rl := &switchboardv1alpha1.APIKeyRateLimit{Requests: int32(n), Period: metav1.Duration{Duration: period}} //nolint:gosec // bounded above
	switch {
	case burst < 0 || burst > n:
		return nil, fmt.Errorf("the burst must be from 1 to the rate limit's requests (%d), not %d", n, burst)
	case burst > 0:
		b := int32(burst) //nolint:gosec // bounded by n
		rl.Burst = &b
	}
	return rl, nil
}

// ParseSourceRanges reads CIDRs (IPv4 or IPv6) as spec.allowedSourceRanges takes them: each
// written as its network address, none twice, at most MaxAllowedSourceRanges. Empty entries
// are ignored, so "a, b," is two ranges.
func ParseSourceRanges(ranges []string) ([]switchboardv1alpha1.CIDR, error) {
	var out []switchboardv1alpha1.CIDR
	seen := map[netip.Prefix]bool{}
	for _, r := range ranges {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return nil, fmt.Errorf("source range %q is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32 (one address is 203.0.113.7/32)", r)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("source range %q must be written as its network address: %s", r, p.Masked())
		}
		if seen[p] {
			return nil, fmt.Errorf("source range %q is given twice", r)
		}
		seen[p] = true
		out = append(out, switchboardv1alpha1.CIDR(p.String()))
	}
	if len(out) > switchboardv1alpha1.MaxAllowedSourceRanges {
		return nil, fmt.Errorf("at most %d source ranges, not %d", switchboardv1alpha1.MaxAllowedSourceRanges, len(out))
	}
	return out, nil
}

// audienceRule is what an audience must look like, in the words of the CRD's message.
const audienceRule = "lower-case letters, digits and '-', starting and ending with a letter or digit, such as connections or billing-v2"

// ParseAudiences reads audiences as spec.audiences takes them, separated by commas or spaces
// ("billing, connections"): each a DNS label (RFC 1123) of at most MaxAudienceLength
// characters, none twice, at most MaxAudiences. Empty entries are ignored, and nothing at all
// is no audiences: the key may then be used for every audience.
func ParseAudiences(s string) ([]switchboardv1alpha1.Audience, error) {
	var out []switchboardv1alpha1.Audience
	seen := map[string]bool{}
	for _, a := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		if msg := checkAudience(a); msg != "" {
			return nil, errors.New(msg)
		}
		if seen[a] {
			return nil, fmt.Errorf("audience %q is given twice", a)
		}
		seen[a] = true
		out = append(out, switchboardv1alpha1.Audience(a))
	}
	if len(out) > switchboardv1alpha1.MaxAudiences {
		return nil, fmt.Errorf("at most %d audiences, not %d", switchboardv1alpha1.MaxAudiences, len(out))
	}
	return out, nil
}

// checkAudience says what is wrong with an audience, or "".
func checkAudience(a string) string {
	switch {
	case len(a) > switchboardv1alpha1.MaxAudienceLength:
		return fmt.Sprintf("audience %q is longer than %d characters", a, switchboardv1alpha1.MaxAudienceLength)
	case len(validation.IsDNS1123Label(a)) == 0:
		return ""
	case len(validation.IsDNS1123Label(strings.ToLower(a))) == 0:
		return fmt.Sprintf("audience %q must be written in lower case: %s", a, strings.ToLower(a))
	}
	return fmt.Sprintf("audience %q is not a DNS label: %s", a, audienceRule)
}

// FormatRateLimit is a key's rate limit as the views show it, without spaces so that a table
// column stays one word: "100/1m", "100/1m,burst=20", or "" for none.
func FormatRateLimit(rl *switchboardv1alpha1.APIKeyRateLimit) string {
	if rl == nil {
		return ""
	}
	s := strconv.Itoa(int(rl.Requests)) + "/" + FormatPeriod(rl.Period.Duration)
	if rl.Burst != nil && *rl.Burst != rl.Requests {
		s += ",burst=" + strconv.Itoa(int(*rl.Burst))
	}
	return s
}

// FormatPeriod writes a period the way one types it: 1m rather than 1m0s.
func FormatPeriod(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// FormatSourceRanges is a key's allowed source ranges as the views show them:
// "10.0.0.0/8,2001:db8::/32", or "" for anywhere.
func FormatSourceRanges(ranges []switchboardv1alpha1.CIDR) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = string(r)
	}
	return strings.Join(parts, ",")
}

// FormatAudiences is a key's audiences as the views show them: "billing,connections", or ""
// for every audience.
func FormatAudiences(audiences []switchboardv1alpha1.Audience) string {
	parts := make([]string, len(audiences))
	for i, a := range audiences {
		parts[i] = string(a)
	}
	return strings.Join(parts, ",")
}

// SetPolicy changes the rate limit, the allowed source ranges and the audiences of an existing
// APIKey: change gets its current policy and edits it. The key itself does not change, and a
// new limit starts from the budget the key has left. Permissions are checked first.
func (k *Client) SetPolicy(ctx context.Context, namespace, name string, change func(*Policy)) (*switchboardv1alpha1.APIKey, error) {
	key, err := k.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if err := k.Check(ctx, namespace, Needs(OpSetPolicy, true)); err != nil {
		return nil, err
	}
	before := key.DeepCopy()
	p := PolicyOf(key)
	change(&p)
	p.Apply(&key.Spec)
	if err := k.c.Patch(ctx, key, client.MergeFrom(before)); err != nil {
		return nil, apiError(err, APIKeys.verb("patch"), namespace, name)
	}
	return key, nil
}
