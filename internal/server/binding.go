package server

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
	"github.com/switchboard-dev/switchboard/internal/server/workload/satoken"
)

// workloadTokens are the verifier of the ServiceAccount tokens presented with bound keys and the
// informer of pods it checks them against, when binding.serviceAccountTokens is on; the zero
// value (off) verifies none and is always synced.
type workloadTokens struct {
	verifier *satoken.Verifier
	pods     *satoken.PodInformer
}

// newWorkloadTokens builds them from the configuration: a metadata-only informer of every pod
// (list and watch of pods) and the cluster's issuer discovery, read through the server's client
// (the nonResourceURLs /.well-known/openid-configuration and /openid/v1/jwks, which
// system:service-account-issuer-discovery grants).
func (h *host) newWorkloadTokens() (workloadTokens, error) {
	b := &h.c.Binding
	if !*b.ServiceAccountTokens {
		return workloadTokens{}, nil
	}
	md, err := metadata.NewForConfig(h.deps.RESTConfig)
	if err != nil {
		return workloadTokens{}, fmt.Errorf("binding: a metadata client of pods: %w", err)
	}
	pods, err := satoken.NewPodInformer(md, "")
	if err != nil {
		return workloadTokens{}, fmt.Errorf("binding: the informer of pods: %w", err)
	}
	kube, err := kubernetes.NewForConfig(h.deps.RESTConfig)
	if err != nil {
		return workloadTokens{}, fmt.Errorf("binding: a client of the issuer discovery: %w", err)
	}
	v, err := satoken.New(satoken.Options{Audience: b.TokenAudience, Client: kube.Discovery().RESTClient(), Pods: pods, Clock: h.deps.Clock})
	if err != nil {
		return workloadTokens{}, fmt.Errorf("binding: %w", err)
	}
	return workloadTokens{verifier: v, pods: pods}, nil
}

// tokens is the verifier as the decision takes it: a nil interface when off.
func (w workloadTokens) tokens() keycheck.TokenVerifier {
	if w.verifier == nil {
		return nil
	}
	return w.verifier
}

// run watches pods and fetches the cluster's keys until ctx is done. A first fetch that fails is
// logged: a token naming a key not fetched fetches the keys again (at most every 10 s).
func (w workloadTokens) run(ctx context.Context, h *host) {
	if w.verifier == nil {
		return
	}
	go w.pods.Run(ctx)
	if err := w.verifier.Start(ctx); err != nil {
		h.log.Info("reading the cluster's ServiceAccount issuer discovery failed; tokens are refused until a later fetch succeeds", "error", err.Error())
	}
}

// hasSynced says the pods are listed: until they are, every pod looks gone.
func (w workloadTokens) hasSynced() bool { return w.pods == nil || w.pods.HasSynced() }
