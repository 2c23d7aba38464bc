package reveal

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"

	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

// handler claims reveal Secrets for the people its (already authenticated and authorized)
// callers act for.
type handler struct {
	// c reads and deletes Secrets with the operator's identity, uncached.
	c client.Client
	// sar asks the API server what a person may do.
	sar authorizationclient.SubjectAccessReviewInterface
	log logr.Logger
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != reveal.Path {
		writeProblem(w, http.StatusNotFound, reveal.Problem{Code: reveal.CodeBadRequest, Message: "only POST " + reveal.Path + " is served here"})
		return
	}
	var req reveal.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, http.StatusBadRequest, reveal.Problem{Code: reveal.CodeBadRequest, Message: "the request is not a reveal request: " + err.Error()})
		return
	}
	if msg := validate(&req); msg != "" {
		writeProblem(w, http.StatusBadRequest, reveal.Problem{Code: reveal.CodeBadRequest, Message: msg})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	status, body := h.claim(ctx, &req)
	if p, ok := body.(reveal.Problem); ok {
		writeProblem(w, status, p)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(body)
}

// claim reviews the person's rights on the Secret, then claims it; it returns the status and
// a reveal.Response or a reveal.Problem.
func (h *handler) claim(ctx context.Context, req *reveal.Request) (int, any) {
	log := h.log.WithValues("user", req.User, "namespace", req.Namespace, "apiKey", req.Name, "secret", req.SecretName)
	missing, err := h.missing(ctx, req)
	if err != nil {
		log.Error(err, "reviewing the person's rights")
		return http.StatusServiceUnavailable, reveal.Problem{Code: reveal.CodeUnavailable, Message: "the operator could not ask the API server what " + req.User + " may do; try again"}
	}
	if len(missing) > 0 {
		log.Info("reveal refused: the person may not claim the Secret themselves", "missing", missing)
		return http.StatusForbidden, reveal.Problem{Code: reveal.CodeForbidden, Missing: missing,
			Message: req.User + " may not claim the reveal Secret " + req.SecretName + " in namespace " + req.Namespace}
	}
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name, UID: req.UID}}
	key.Status.RevealSecretName = req.SecretName
	revealed, err := keyclient.Claim(ctx, h.c, key)
	switch {
	case err == nil:
		log.Info("claimed a key for the person", "hint", revealed.Hint, "keyGeneration", revealed.Generation)
		return http.StatusOK, reveal.Response{Key: revealed.Key, Hint: revealed.Hint, Generation: revealed.Generation}
	case errors.Is(err, keyclient.ErrAlreadyClaimed):
		return http.StatusConflict, reveal.Problem{Code: reveal.CodeAlreadyClaimed, Message: keyclient.ErrAlreadyClaimed.Error()}
	case errors.Is(err, keyclient.ErrNotARevealSecret):
		log.Info("reveal refused: not the reveal Secret of this APIKey")
		return http.StatusUnprocessableEntity, reveal.Problem{Code: reveal.CodeNotARevealSecret, Message: err.Error()}
	default:
		log.Error(err, "claiming the reveal Secret")
		return http.StatusServiceUnavailable, reveal.Problem{Code: reveal.CodeUnavailable, Message: "the operator could not claim the reveal Secret; try again"}
	}
}

// missing asks the API server which of get and delete on the Secret the person lacks, as
// the API server would decide them for the impersonated person (who is always
// system:authenticated too).
func (h *handler) missing(ctx context.Context, req *reveal.Request) ([]string, error) {
	groups := append(append(make([]string, 0, len(req.Groups)+1), req.Groups...), "system:authenticated")
	var missing []string
	for _, verb := range []string{"get", "delete"} {
		review, err := h.sar.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: req.User, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: req.Namespace, Verb: verb, Resource: "secrets", Name: req.SecretName},
		}}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		if !review.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	return missing, nil
}

func writeProblem(w http.ResponseWriter, status int, p reveal.Problem) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error reveal.Problem `json:"error"`
	}{p})
}
