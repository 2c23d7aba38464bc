package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey/permission"
	"github.com/switchboard-dev/switchboard/internal/clientaddr"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// errNo is `key can-i`'s "no": its answer is printed already, and it exits 1, as
// `kubectl auth can-i` does.
var errNo = errors.New("no")

// keyCanIOptions are the flags of `key can-i`.
type keyCanIOptions struct {
	*Options
	audience, source string
}

func newKeyCanICommand(o *Options) *cobra.Command {
	opts := &keyCanIOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "can-i NAME METHOD PATH",
		Short: "Say whether an APIKey may make a request, and which rule refuses it",
		Long: "Answer, without calling the API, whether the key of APIKey NAME may make METHOD PATH, as the\n" +
			"server decides it after the key is authenticated: its audiences, its source ranges, then its\n" +
			"permissions, first matching rule wins. It prints yes, or no with the code and message the\n" +
			"server would answer (naming the refusing rule), and exits 1 for no. Rate limits and credits\n" +
			"are not judged. Without --source the client's address is unknown, as to a server behind a\n" +
			"proxy it does not trust: keys with source ranges are refused.",
		Example: "  kubectl switchboard key can-i billing-reader GET /v1/connections\n" +
			"  kubectl switchboard key can-i billing-reader DELETE /v1/connections/conn_1 --source 203.0.113.7",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 3 {
				return fmt.Errorf("key can-i needs NAME METHOD PATH, got %d arguments", len(args))
			}
			return exactlyOneName("key can-i")(nil, args[:1])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.run(cmd.Context(), args[0], args[1], args[2])
		},
	}
	cmd.Flags().StringVar(&opts.audience, "audience", "connections", "the route's audience (the server's own /v1: its --audience)")
	cmd.Flags().StringVar(&opts.source, "source", "", "the client's address (unknown when empty)")
	return cmd
}

func (o *keyCanIOptions) run(ctx context.Context, name, method, path string) error {
	req := permission.Request{Method: strings.ToUpper(method), Path: path, Audience: o.audience}
	if o.source != "" {
		a, err := netip.ParseAddr(o.source)
		if err != nil {
			return fmt.Errorf("--source %q is not an IP address", o.source)
		}
		req.Source, req.SourceKnown = a.Unmap(), true
	}
	c, ns, key, err := o.getKey(ctx, name)
	if err != nil {
		return err
	}
	roles := map[string]*permission.Rules{}
	for _, r := range key.Spec.PermissionRoles {
		var role switchboardv1alpha1.APIKeyRole
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r}, &role); {
		case apierrors.IsNotFound(err): // refused as the server refuses it
		case err != nil:
			return explain(err, action{verb: "get", resource: "apikeyroles.switchboard.dev", kind: "APIKeyRole", namespace: ns, name: r})
		default:
			roles[r], _ = permission.CompileRole(r, role.Spec.Rules)
		}
	}
	code, msg := decide(&key.Spec, roles, req)
	if code == "" {
		fmt.Fprintln(o.Out, "yes")
		return nil
	}
	fmt.Fprintf(o.Out, "no: 403 %s: %s\n", code, msg)
	return errNo
}

// decide is what the server decides of req for a key with spec, whose existing roles are
// roles (compiled), once the key is authenticated and before its rate limit: the code and
// message of its refusal, or "" when it may pass. It follows keycheck's order (audiences,
// source ranges, permissions) and its messages.
func decide(spec *switchboardv1alpha1.APIKeySpec, roles map[string]*permission.Rules, req permission.Request) (code, msg string) {
	if len(spec.Audiences) > 0 && !slices.Contains(spec.Audiences, switchboardv1alpha1.Audience(req.Audience)) {
		return apicode.AudienceNotAllowed, "its audiences do not include " + fmt.Sprintf("%q", req.Audience)
	}
	if len(spec.AllowedSourceRanges) > 0 {
		if !req.SourceKnown {
			return apicode.SourceNotAllowed, "it may be used only from its allowed source ranges, and the client's address is unknown (give --source)"
		}
		if !slices.ContainsFunc(spec.AllowedSourceRanges, func(c switchboardv1alpha1.CIDR) bool {
			p, err := netip.ParsePrefix(string(c))
			return err == nil && clientaddr.Range(p).Contains(req.Source)
		}) {
			return apicode.SourceNotAllowed, "its allowed source ranges do not include " + req.Source.String()
		}
	}
	rules, err := permission.Compile(spec.Permissions)
	if err != nil {
		rules = &permission.Rules{} // as the server holds it: a key whose rules do not compile may do nothing
	} else if len(spec.PermissionRoles) > 0 {
		rules = permission.WithRoles(rules, spec.PermissionRoles, func(name string) (*permission.Rules, bool) {
			r, ok := roles[name]
			return r, ok
		})
	}
	if rules == nil {
		return "", ""
	}
	if d := rules.Decide(req); !d.Allowed {
		return apicode.PermissionDenied, d.Refusal(req.Method, req.Path)
	}
	return "", ""
}
