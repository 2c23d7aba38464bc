package panel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

// ImpersonationRule is one grant the panel's ServiceAccount needs in impersonate mode, with the
// verbs of constrained impersonation (KEP-5284) as kube-apiserver 1.36 checks them:
// "impersonate:user-info" on users and groups of authentication.k8s.io, to name a plain user
// (no node, no ServiceAccount), and "impersonate-on:user-info:<verb>" on each resource, to do
// <verb> on it as that user. The chart's ClusterRole is these rules; the panel's tests bind
// exactly them.
type ImpersonationRule struct {
	Group     string
	Resources []string
	Verbs     []string
}

// ImpersonationRules are the panel's whole impersonation grant. The panel reads and changes
// APIKeys, lists Connections, lists namespaces for its selector and asks
// SelfSubjectAccessReviews to explain a refusal. Nothing else: no other resource (a key's
// one-time reveal Secret is claimed by the operator for the person, internal/operator/reveal), no
// ServiceAccount or node, no "impersonate" verb.
var ImpersonationRules = []ImpersonationRule{
	{Group: "authentication.k8s.io", Resources: []string{"users", "groups"}, Verbs: []string{"impersonate:user-info"}},
	{Group: "switchboard.dev", Resources: []string{"apikeys"}, Verbs: onUserInfo("get", "list", "watch", "create", "patch", "delete")},
	{Group: "switchboard.dev", Resources: []string{"connections"}, Verbs: onUserInfo("get", "list")},
	{Group: "", Resources: []string{"namespaces"}, Verbs: onUserInfo("list")},
	{Group: "authorization.k8s.io", Resources: []string{"selfsubjectaccessreviews"}, Verbs: onUserInfo("create")},
}

func onUserInfo(verbs ...string) []string {
	out := make([]string, len(verbs))
	for i, v := range verbs {
		out[i] = "impersonate-on:user-info:" + v
	}
	return out
}

// checkImpersonationGrant runs at start in impersonate mode: the panel's ServiceAccount must
// hold the constrained grant. When it holds only the legacy "impersonate" verb (which lets it
// become anyone, ServiceAccounts and system:masters included, for any request) the panel
// refuses to start unless allowLegacy: a panel pod is exposed to the web, and that grant would
// make it cluster-admin for whoever takes it over.
func checkImpersonationGrant(ctx context.Context, cs kubernetes.Interface, allowLegacy bool, log logr.Logger) error {
	can := func(attrs authorizationv1.ResourceAttributes) (bool, error) {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking the API server what the panel may impersonate: %w", err)
		}
		return r.Status.Allowed, nil
	}
	var missing []string
	for _, rule := range ImpersonationRules {
		for _, res := range rule.Resources {
			for _, verb := range rule.Verbs {
				ok, err := can(authorizationv1.ResourceAttributes{Group: rule.Group, Resource: res, Verb: verb})
				if err != nil {
					return err
				}
				if !ok {
					missing = append(missing, verb+" on "+qualified(rule.Group, res))
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	legacy, err := can(authorizationv1.ResourceAttributes{Resource: "users", Verb: "impersonate"})
	if err != nil {
		return err
	}
	switch {
	case legacy && allowLegacy:
		log.Info("WARNING: impersonating with the legacy, unlimited \"impersonate\" verb (allowed by configuration); grant the constrained verbs instead",
			"missing", strings.Join(missing, ", "))
		return nil
	case legacy:
		return errors.New("the panel's ServiceAccount may impersonate users only through the legacy \"impersonate\" verb, which lets it act as anyone on anything; " +
			"grant the constrained verbs (the chart's impersonation ClusterRole: " + strings.Join(missing, ", ") +
			") or, knowingly, allow legacy impersonation (--oidc-allow-legacy-impersonation)")
	}
	return errors.New("the panel's ServiceAccount may not impersonate the signed-in users; grant it " + strings.Join(missing, ", ") +
		" (the chart's impersonation ClusterRole does)")
}

// checkRevealGrant runs at start in impersonate mode: the panel's ServiceAccount must be allowed
// to post the operator's reveal endpoint and to read the ConfigMap of its certificates, or no
// key it creates could be shown.
func checkRevealGrant(ctx context.Context, cs kubernetes.Interface, bundleNS, bundleName string) error {
	var missing []string
	for _, spec := range []authorizationv1.SelfSubjectAccessReviewSpec{
		{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: reveal.Path, Verb: "post"}},
		{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: bundleNS, Resource: "configmaps", Name: bundleName, Verb: "get"}},
	} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("asking the API server what the panel may do: %w", err)
		}
		if r.Status.Allowed {
			continue
		}
		if spec.NonResourceAttributes != nil {
			missing = append(missing, "post "+reveal.Path+" (a non-resource URL)")
		} else {
			missing = append(missing, "get configmaps "+bundleName+" in namespace "+bundleNS)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("the operator claims the keys the panel shows, and the panel's ServiceAccount may not ask it: grant it " +
		strings.Join(missing, " and ") + " (the chart's panel roles do)")
}

func qualified(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// AuthenticationConfigYAML is the AuthenticationConfiguration (apiserver.config.k8s.io/v1, GA
// since Kubernetes 1.34) that makes an API server trust o's issuer with the same claim mapping
// as the panel, for token mode (o's, with the defaults where o leaves it unset): the panel
// shows it when the API server rejects an ID token, the docs and the tests use it. caPEM, when
// given, is the issuer's CA.
func AuthenticationConfigYAML(oidc *configv1alpha1.OIDC, caPEM string) string {
	o := *oidc
	configv1alpha1.SetDefaults_PanelSettings(&configv1alpha1.PanelSettings{OIDC: &o})
	type claim struct {
		Claim  string `json:"claim"`
		Prefix string `json:"prefix"`
	}
	issuer := map[string]any{"url": o.IssuerURL, "audiences": []string{o.ClientID}}
	if caPEM != "" {
		issuer["certificateAuthority"] = caPEM
	}
	doc := map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AuthenticationConfiguration",
		"jwt": []any{map[string]any{
			"issuer": issuer,
			"claimMappings": map[string]any{
				"username": claim{Claim: *o.UsernameClaim, Prefix: *o.UsernamePrefix},
				"groups":   claim{Claim: *o.GroupsClaim, Prefix: *o.GroupsPrefix},
			},
		}},
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
