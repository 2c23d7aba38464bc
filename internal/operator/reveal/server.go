package reveal

import (
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// NewHandler returns the endpoint acting with cfg (the operator's identity): it authenticates
// and authorizes its callers, reviews the people they name, and reads and deletes reveal
// Secrets, all with cfg. It logs each reveal by hint, never by key. The operator serves it
// over HTTPS through the front door's reveal door.
func NewHandler(cfg *rest.Config, log logr.Logger) (http.Handler, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("reveal endpoint: %w", err)
	}
	return filter(log, &handler{c: c, sar: cs.AuthorizationV1().SubjectAccessReviews(), log: log})
}
