// Package reveal is the operator's reveal endpoint: it lets a component that acts for people,
// but may not read Secrets itself, claim a key's one-time reveal Secret for the person it acts
// for (the web panel in impersonate mode), over the protocol of internal/keyclient/reveal.
//
// The operator serves POST /reveal over HTTPS (NewHandler). Its caller must present a token that
// RBAC allows to "post" the non-resource URL /reveal (TokenReview, then SubjectAccessReview:
// controller-runtime's metrics filter). The request names the person and the reveal Secret;
// the operator asks the API server whether that person may get and delete that very Secret
// (SubjectAccessReview), and only then claims it with its own identity, exactly as the person
// would have (keyclient.Claim: owner by UID, then delete with UID and resourceVersion
// preconditions, so exactly one claimer ever gets the key).
//
// So the caller's reach shrinks from every Secret a person may read to switchboard's reveal
// Secrets, and no Secret can be read at all for a name under "system:" (a ServiceAccount, a
// node, system:masters): those are refused before any review, as constrained impersonation
// refuses them.
//
// Each operator replica signs its own serving certificate in memory
// (internal/operator/servingcert: the private key is never written anywhere) and adds the
// certificate to a CA bundle ConfigMap, which callers trust (the protocol's Client re-reads it
// when a replica presents one it does not know yet).
package reveal

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

// Bounds of a request: a caller is trusted to be who it is, not to be well-behaved.
const (
	maxRequestBytes = 16 << 10
	maxGroups       = 256
	maxNameLength   = 512
)

// validate says what is wrong with r, or "" when nothing is: the endpoint's bounds.
func validate(r *reveal.Request) string {
	var problems []string
	if errs := validation.IsDNS1123Label(r.Namespace); len(errs) > 0 {
		problems = append(problems, "namespace: "+errs[0])
	}
	for _, n := range []struct{ field, value string }{{"name", r.Name}, {"secretName", r.SecretName}} {
		if errs := validation.IsDNS1123Subdomain(n.value); len(errs) > 0 {
			problems = append(problems, n.field+": "+errs[0])
		}
	}
	if r.UID == "" || len(r.UID) > 64 {
		problems = append(problems, "uid: must be the APIKey's UID")
	}
	if msg := checkName("user", r.User); msg != "" {
		problems = append(problems, msg)
	}
	if len(r.Groups) > maxGroups {
		problems = append(problems, fmt.Sprintf("groups: at most %d", maxGroups))
	} else {
		for _, g := range r.Groups {
			if msg := checkName("group", g); msg != "" {
				problems = append(problems, msg)
				break
			}
		}
	}
	return strings.Join(problems, "; ")
}

// checkName refuses empty, overlong and "system:" names: a reveal is never made for a
// ServiceAccount, a node or a system group, whose rights a caller could otherwise borrow.
func checkName(what, name string) string {
	switch {
	case name == "":
		return what + ": must not be empty"
	case len(name) > maxNameLength:
		return fmt.Sprintf("%s: longer than %d characters", what, maxNameLength)
	case strings.HasPrefix(name, "system:"):
		return what + " " + name + ": names under \"system:\" are never acted for"
	}
	return ""
}
