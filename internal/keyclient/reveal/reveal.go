// Package reveal is the reveal protocol: how a component that acts for people, but may not
// read Secrets itself (the web panel in impersonate mode), asks the operator to claim a key's
// one-time reveal Secret for the person it acts for. The operator serves it
// (internal/operator/reveal); the panel calls it with Client. Both speak it through this
// package, and neither imports the other.
//
// The caller POSTs a Request to Path over HTTPS, with its own ServiceAccount token, trusting
// the certificates of a CA bundle ConfigMap (BundleKey); it gets a Response (the key, shown
// once) or a Problem, whose Code it branches on.
package reveal

import (
	"errors"

	"k8s.io/apimachinery/pkg/types"
)

// Path is the endpoint's only path, and the non-resource URL RBAC grants ("post").
const Path = "/reveal"

// BundleKey is the key of the CA bundle in its ConfigMap: the certificates a caller trusts the
// endpoint's replicas by (internal/operator/servingcert publishes them there).
const BundleKey = "ca.crt"

// Request asks for the reveal Secret SecretName of APIKey Namespace/Name (by UID) on behalf
// of User and Groups, as the API server would know them under impersonation.
type Request struct {
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	SecretName string    `json:"secretName"`
	User       string    `json:"user"`
	Groups     []string  `json:"groups,omitempty"`
}

// Response is a claimed key. Key is shown once and never logged.
type Response struct {
	Key        string `json:"key"`
	Hint       string `json:"hint"`
	Generation int64  `json:"generation"`
}

// Problem is every refusal's body: callers branch on Code.
type Problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Missing lists the verbs on the Secret the person lacks ("get", "delete"), for Forbidden.
	Missing []string `json:"missing,omitempty"`
}

// The codes of Problem.
const (
	CodeBadRequest       = "BadRequest"
	CodeForbidden        = "Forbidden"
	CodeAlreadyClaimed   = "AlreadyClaimed"
	CodeNotARevealSecret = "NotARevealSecret"
	CodeUnavailable      = "Unavailable"
)

// errNoToken is returned by NewClient for an identity without a bearer token.
var errNoToken = errors.New("the reveal endpoint authenticates its callers by bearer token, and this identity has none (run as a ServiceAccount)")
