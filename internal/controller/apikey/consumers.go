package apikey

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/workloads"
)

// The consumers of a delivery Secret (found by internal/workloads) that hold the old key after a rotation: the pods of the
// Deployments, StatefulSets and DaemonSets whose template takes the Secret by environment
// variable (env valueFrom, envFrom) or by a subPath mount, which the kubelet never updates, so
// that only a restart shows them the new key. Pods that mount the Secret as a whole volume see
// the new key within the kubelet's sync period and are judged by their traffic alone.
//
// Read from the API server, not the cache, and only for keys whose grace may end on evidence
// once the old key's traffic has stopped (needsConsumers): the operator holds no grant to read
// workloads or pods anywhere; a tenant lets it in its own namespace by binding the
// switchboard-consumer-reader ClusterRole (config/rbac/consumer_reader_role.yaml). Pods are
// read as metadata only (their creation time), selected by the workload's selector.

// readConsumers reads the pods of key's namespace that take its delivery Secret in a way that
// needs a restart and started no later than writtenAt, when the new key was written.
func (r *Reconciler) readConsumers(ctx context.Context, key *switchboardv1alpha1.APIKey, writtenAt time.Time) *consumerState {
	found, forbidden, err := workloads.Find(ctx, r.APIReader, key.Namespace, key.Spec.SecretName)
	switch {
	case err != nil:
		return &consumerState{unreadable: fmt.Sprintf("could not list workloads: %v", err)}
	case len(forbidden) > 0:
		return &consumerState{unreadable: "forbidden to " + strings.Join(forbidden, ", ")}
	}
	state := &consumerState{}
	for _, w := range found {
		if !w.Use.NeedsRestart() {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil || sel.Empty() {
			continue // the API server refuses such workloads; none has pods of its own
		}
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.APIReader.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			if apierrors.IsForbidden(err) {
				return &consumerState{unreadable: "forbidden to list pods"}
			}
			return &consumerState{unreadable: fmt.Sprintf("could not list pods: %v", err)}
		}
		name := strings.ToLower(w.Kind) + "/" + w.Name // as kubectl names it
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && !p.CreationTimestamp.After(writtenAt) {
				state.holders = append(state.holders, fmt.Sprintf("%s (%s)", p.Name, name))
			}
		}
	}
	slices.Sort(state.holders)
	return state
}
