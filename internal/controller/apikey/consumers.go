package apikey

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// The consumers of a delivery Secret that hold the old key after a rotation: the pods of the
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
	var workloads []workload
	lists := []struct {
		kind string
		list client.ObjectList
		each func(client.ObjectList) []workload
	}{
		{"Deployment", &appsv1.DeploymentList{}, func(l client.ObjectList) (out []workload) {
			for _, d := range l.(*appsv1.DeploymentList).Items {
				out = append(out, workload{"deployment/" + d.Name, d.Spec.Selector, &d.Spec.Template.Spec})
			}
			return out
		}},
		{"StatefulSet", &appsv1.StatefulSetList{}, func(l client.ObjectList) (out []workload) {
			for _, s := range l.(*appsv1.StatefulSetList).Items {
				out = append(out, workload{"statefulset/" + s.Name, s.Spec.Selector, &s.Spec.Template.Spec})
			}
			return out
		}},
		{"DaemonSet", &appsv1.DaemonSetList{}, func(l client.ObjectList) (out []workload) {
			for _, d := range l.(*appsv1.DaemonSetList).Items {
				out = append(out, workload{"daemonset/" + d.Name, d.Spec.Selector, &d.Spec.Template.Spec})
			}
			return out
		}},
	}
	for _, l := range lists {
		if err := r.APIReader.List(ctx, l.list, client.InNamespace(key.Namespace)); err != nil {
			return &consumerState{unreadable: readError("list "+l.kind+"s", err)}
		}
		workloads = append(workloads, l.each(l.list)...)
	}
	state := &consumerState{}
	for _, w := range workloads {
		if !takesByRestart(w.pods, key.Spec.SecretName) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() {
			continue // the API server refuses such workloads; none has pods of its own
		}
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.APIReader.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return &consumerState{unreadable: readError("list pods", err)}
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && !p.CreationTimestamp.After(writtenAt) {
				state.holders = append(state.holders, fmt.Sprintf("%s (%s)", p.Name, w.name))
			}
		}
	}
	slices.Sort(state.holders)
	return state
}

// workload is what readConsumers needs of a Deployment, StatefulSet or DaemonSet.
type workload struct {
	name     string // kind/name, lower case, as kubectl names it
	selector *metav1.LabelSelector
	pods     *corev1.PodSpec
}

// readError says why workloads could not be read, without the API server's full text.
func readError(what string, err error) string {
	if apierrors.IsForbidden(err) {
		return "forbidden to " + what
	}
	return fmt.Sprintf("could not %s: %v", what, err)
}

// takesByRestart says whether pods of spec take Secret name in a way that only a restart
// updates: an environment variable of any container (env valueFrom.secretKeyRef, envFrom
// secretRef), or a mount with a subPath of a volume that holds the Secret (as a secret volume
// or a projected one).
func takesByRestart(spec *corev1.PodSpec, name string) bool {
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil && v.Secret.SecretName == name:
			volumes[v.Name] = true
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == name {
					volumes[v.Name] = true
				}
			}
		}
	}
	containers := slices.Concat(spec.InitContainers, spec.Containers)
	for _, e := range spec.EphemeralContainers {
		containers = append(containers, corev1.Container(e.EphemeralContainerCommon))
	}
	for _, c := range containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil && e.SecretRef.Name == name {
				return true
			}
		}
		for _, m := range c.VolumeMounts {
			if volumes[m.Name] && (m.SubPath != "" || m.SubPathExpr != "") {
				return true
			}
		}
	}
	return false
}
