package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// policyFlags are the flags that say what a key may do, on `key create` and `key policy`. A flag
// left empty changes nothing; "none" and "any" remove a limit.
type policyFlags struct {
	rateLimit    string
	burst        int
	sourceRanges []string
	audiences    []string
}

// The values that remove a limit in `key policy`.
const (
	noRateLimit = "none"
	anySource   = "any"
	anyAudience = "any"
)

func (p *policyFlags) addFlags(f *pflag.FlagSet) {
	f.StringVar(&p.rateLimit, "rate-limit", "", "at most REQUESTS per PERIOD through /v1, e.g. 100/1m (past it: 429 API_KEY_RATE_LIMITED)")
	f.IntVar(&p.burst, "burst", 0, "at most this many of the rate limit's requests at once (default: all of them)")
	f.StringSliceVar(&p.sourceRanges, "allowed-source-ranges", nil, "CIDRs the key may be used from, comma-separated, e.g. 203.0.113.0/24,2001:db8::/32\n(from elsewhere: 403 SOURCE_NOT_ALLOWED; default: anywhere)")
	f.StringSliceVar(&p.audiences, "audiences", nil, "the APIs the key may be used for, comma-separated, e.g. billing,connections (the server's own /v1\n"+
		"is \"connections\" unless its --audience says otherwise; a gateway route names its own)\n(elsewhere: 403 AUDIENCE_NOT_ALLOWED; default: every audience)")
}

func (p *policyFlags) given() bool {
	return p.rateLimit != "" || p.burst != 0 || len(p.sourceRanges) > 0 || len(p.audiences) > 0
}

// change edits policy with the flags that were given, and only those.
func (p *policyFlags) change(policy *keyclient.Policy) error {
	if p.rateLimit != "" || p.burst != 0 {
		if p.rateLimit == "" {
			return errors.New("--burst needs --rate-limit (e.g. --rate-limit 100/1m --burst 20)")
		}
		rate := p.rateLimit
		if rate == noRateLimit {
			rate = ""
		}
		rl, err := keyclient.ParseRateLimit(rate, p.burst)
		if err != nil {
			return fmt.Errorf("--rate-limit: %w", err)
		}
		policy.RateLimit = rl
	}
	if len(p.sourceRanges) > 0 {
		ranges := p.sourceRanges
		if len(ranges) == 1 && ranges[0] == anySource {
			ranges = nil
		}
		parsed, err := keyclient.ParseSourceRanges(ranges)
		if err != nil {
			return fmt.Errorf("--allowed-source-ranges: %w", err)
		}
		policy.AllowedSourceRanges = parsed
	}
	if len(p.audiences) > 0 {
		parsed, err := keyclient.ParseAudiences(strings.Join(p.audiences, ","))
		if err != nil {
			return fmt.Errorf("--audiences: %w", err)
		}
		switch {
		case len(parsed) == 1 && parsed[0] == anyAudience:
			parsed = nil
		case slices.Contains(parsed, anyAudience):
			return fmt.Errorf("--audiences: %q allows every audience and is given alone", anyAudience)
		}
		policy.Audiences = parsed
	}
	return nil
}

// keyPolicyOptions are the flags of `key policy`.
type keyPolicyOptions struct {
	*Options
	policy policyFlags
}

func newKeyPolicyCommand(o *Options) *cobra.Command {
	opts := &keyPolicyOptions{Options: o}
	cmd := nameCommand(&cobra.Command{
		Use:   "policy NAME",
		Short: "Change an API key's rate limit, allowed source ranges and audiences",
		Long: "Change what an existing key may do; the key itself stays the same. Only the flags given change:\n" +
			"--rate-limit none removes the limit, --allowed-source-ranges any allows every address again,\n" +
			"--audiences any allows every audience again. --audiences replaces the key's audiences with those given.",
		Example: "  kubectl switchboard key policy ci --rate-limit 600/1m\n" +
			"  kubectl switchboard key policy partner --allowed-source-ranges 203.0.113.0/24,198.51.100.0/24\n" +
			"  kubectl switchboard key policy billing-sync --audiences billing,connections\n" +
			"  kubectl switchboard key policy partner --rate-limit none --allowed-source-ranges any --audiences any",
	}, opts.run)
	opts.policy.addFlags(cmd.Flags())
	return cmd
}

func (o *keyPolicyOptions) run(ctx context.Context, name string) error {
	if !o.policy.given() {
		return errors.New("nothing to change: give --rate-limit, --burst, --allowed-source-ranges or --audiences")
	}
	// Parse before anything is asked of the cluster: a bad flag changes nothing.
	if err := o.policy.change(&keyclient.Policy{}); err != nil {
		return err
	}
	keys, ns, err := o.keys()
	if err != nil {
		return err
	}
	key, err := keys.SetPolicy(ctx, ns, name, func(p *keyclient.Policy) { _ = o.policy.change(p) })
	if err != nil {
		return explainKey(err)
	}
	fmt.Fprintf(o.Out, "APIKey %q in namespace %q: rate limit %s, from %s, audiences %s\n", name, ns, rateLimitColumn(key), sourcesColumn(key), audiencesColumn(key))
	return nil
}

// rateLimitColumn shows a key's rate limit in one word: "100/1m", "100/1m,burst=20" or "none".
func rateLimitColumn(k *switchboardv1alpha1.APIKey) string {
	if s := keyclient.FormatRateLimit(k.Spec.RateLimit); s != "" {
		return s
	}
	return noRateLimit
}

// maxShown bounds the SOURCES and AUDIENCES columns; -o yaml shows them all.
const maxShown = 2

// sourcesColumn shows a key's allowed source ranges in one word: "anywhere", "10.0.0.0/8",
// or the first two and how many more ("10.0.0.0/8,192.0.2.0/24,+3").
func sourcesColumn(k *switchboardv1alpha1.APIKey) string {
	return listColumn(keyclient.FormatSourceRanges(k.Spec.AllowedSourceRanges), "anywhere")
}

// audiencesColumn shows a key's audiences in one word: "any" (the value of --audiences that
// allows every audience), "connections", or the first two and how many more
// ("billing,connections,+1").
func audiencesColumn(k *switchboardv1alpha1.APIKey) string {
	return listColumn(keyclient.FormatAudiences(k.Spec.Audiences), anyAudience)
}

// listColumn shows a comma-separated list in one word: none when it is empty, else its first
// maxShown entries and how many more.
func listColumn(list, none string) string {
	if list == "" {
		return none
	}
	parts := strings.Split(list, ",")
	shown := strings.Join(parts[:min(len(parts), maxShown)], ",")
	if more := len(parts) - maxShown; more > 0 {
		shown += ",+" + strconv.Itoa(more)
	}
	return shown
}
