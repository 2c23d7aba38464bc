// Package workloads answers one question and acts on the answer: which workloads
// (Deployments, StatefulSets, DaemonSets) of a namespace read a given Secret, and rolling them
// the way `kubectl rollout restart` does, so that their new pods read the Secret as it is now.
// The operator rolls the readers of a leaked key's delivery Secret once the replacement is in
// it; evidence-based grace reads the same discovery to know which pods must restart.
//
// It holds no grant of its own: the reader and writer it is given act with the rights the
// tenant bound in its namespace, and a Forbidden answer means the tenant did not opt in.
package workloads

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestartedAtAnnotation is the pod template annotation `kubectl rollout restart` sets: a new
// value changes the template, so the workload's controller replaces its pods by its own
// rollout strategy (maxUnavailable, partitions, PodDisruptionBudgets are honoured).
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// Use is how a pod spec reads a Secret; the zero Use does not read it.
type Use struct {
	// Env: a container takes a key of it as an environment variable (env.valueFrom.secretKeyRef)
	// or all of it (envFrom.secretRef): fixed when the container starts.
	Env bool
	// Volume: a volume holds it (a secret volume, or a source of a projected one): the kubelet
	// updates the files in place, unless they are mounted by subPath.
	Volume bool
	// SubPath: a container mounts such a volume by subPath (or subPathExpr): the file is fixed
	// when the container starts.
	SubPath bool
}

// Reads says the pod spec reads the Secret at all.
func (u Use) Reads() bool { return u.Env || u.Volume }

// NeedsRestart says a pod holding the Secret's old content keeps it until it restarts: it takes
// the Secret as an environment variable or through a subPath mount.
func (u Use) NeedsRestart() bool { return u.Env || u.SubPath }

// UseOf says how spec reads Secret name of its own namespace: by volume (secret or projected),
// by environment (env.valueFrom.secretKeyRef, envFrom.secretRef), in any container, init
// container or ephemeral container.
func UseOf(spec *corev1.PodSpec, name string) Use {
	var u Use
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		if holds(v.VolumeSource, name) {
			volumes[v.Name] = true
			u.Volume = true
		}
	}
	check := func(env []corev1.EnvVar, from []corev1.EnvFromSource, mounts []corev1.VolumeMount) {
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				u.Env = true
			}
		}
		for _, f := range from {
			if f.SecretRef != nil && f.SecretRef.Name == name {
				u.Env = true
			}
		}
		for _, m := range mounts {
			if volumes[m.Name] && (m.SubPath != "" || m.SubPathExpr != "") {
				u.SubPath = true
			}
		}
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		check(c.Env, c.EnvFrom, c.VolumeMounts)
	}
	for _, c := range spec.EphemeralContainers {
		check(c.Env, c.EnvFrom, c.VolumeMounts)
	}
	return u
}

// holds says a volume source presents Secret name: a secret volume, or a projected one with it
// among its sources.
func holds(v corev1.VolumeSource, name string) bool {
	if v.Secret != nil && v.Secret.SecretName == name {
		return true
	}
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.Secret != nil && s.Secret.Name == name {
				return true
			}
		}
	}
	return false
}

// Workload is a workload whose pods read the Secret asked about, and how.
type Workload struct {
	// Kind is Deployment, StatefulSet or DaemonSet; Name its name.
	Kind, Name string
	// Use is how its pod template reads the Secret.
	Use Use
	// Selector selects its pods.
	Selector *metav1.LabelSelector
	// obj is the object as listed, to patch.
	obj client.Object
}

// String names the workload as kubectl does: Kind/name.
func (w Workload) String() string { return w.Kind + "/" + w.Name }

// kind is one kind of workload: its name, its resource and how to list it.
type kind struct {
	name, resource string
	list           func() client.ObjectList
}

// kinds are the workloads Find looks at, in the order it reports them.
var kinds = []kind{
	{"Deployment", "deployments.apps", func() client.ObjectList { return &appsv1.DeploymentList{} }},
	{"StatefulSet", "statefulsets.apps", func() client.ObjectList { return &appsv1.StatefulSetList{} }},
	{"DaemonSet", "daemonsets.apps", func() client.ObjectList { return &appsv1.DaemonSetList{} }},
}

// podTemplate is a listed workload's pods' selector and their spec (false for what kinds does
// not list).
func podTemplate(obj runtime.Object) (client.Object, *metav1.LabelSelector, *corev1.PodSpec, bool) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return w, w.Spec.Selector, &w.Spec.Template.Spec, true
	case *appsv1.StatefulSet:
		return w, w.Spec.Selector, &w.Spec.Template.Spec, true
	case *appsv1.DaemonSet:
		return w, w.Spec.Selector, &w.Spec.Template.Spec, true
	}
	return nil, nil, nil, false
}

// Find lists, in namespace, the workloads whose pod templates read Secret secret, by kind then
// name. It reads with r, which should go to the API server (no cache: the operator holds no
// grant to watch workloads). A kind the reader may not list is named in forbidden ("list
// deployments.apps"), not an error: the tenant did not grant it.
func Find(ctx context.Context, r client.Reader, namespace, secret string) (found []Workload, forbidden []string, err error) {
	for _, k := range kinds {
		list := k.list()
		if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
			if apierrors.IsForbidden(err) {
				forbidden = append(forbidden, "list "+k.resource)
				continue
			}
			return nil, nil, fmt.Errorf("listing %s in %s: %w", k.resource, namespace, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, nil, err
		}
		var of []Workload
		for _, item := range items {
			obj, selector, spec, ok := podTemplate(item)
			if !ok {
				return nil, nil, fmt.Errorf("listing %s in %s: %T is not a workload", k.resource, namespace, item)
			}
			if u := UseOf(spec, secret); u.Reads() && obj.GetDeletionTimestamp().IsZero() {
				of = append(of, Workload{Kind: k.name, Name: obj.GetName(), Use: u, Selector: selector, obj: obj})
			}
		}
		sort.Slice(of, func(i, j int) bool { return of[i].Name < of[j].Name })
		found = append(found, of...)
	}
	return found, forbidden, nil
}

// Restart rolls w as `kubectl rollout restart` does: its pod template's RestartedAtAnnotation
// set to at (RFC 3339), by a merge patch that touches nothing else.
func Restart(ctx context.Context, c client.Writer, w Workload, at time.Time) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RestartedAtAnnotation, at.UTC().Format(time.RFC3339))
	if err := c.Patch(ctx, w.obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("restarting %s: %w", w, err)
	}
	return nil
}

// Result is what Roll did.
type Result struct {
	// Rolled are the workloads restarted ("Deployment/web").
	Rolled []string
	// Forbidden are the requests the tenant's grant does not allow ("list deployments.apps",
	// "patch StatefulSet/db"): empty when it allows all that was needed.
	Forbidden []string
}

// NotOptedIn says the tenant granted none of it: every kind's list was refused.
func (r Result) NotOptedIn() bool { return len(r.Rolled) == 0 && len(r.Forbidden) >= len(kinds) }

// String says it in a sentence, for a condition message or an Event.
func (r Result) String() string {
	switch {
	case r.NotOptedIn():
		return "workloads not rolled: the namespace did not opt in (no Role lets switchboard's operator list and patch its Deployments, StatefulSets and DaemonSets)"
	case len(r.Rolled) == 0 && len(r.Forbidden) == 0:
		return "no workload reads the delivery Secret, none rolled"
	}
	s := fmt.Sprintf("%d workloads rolled", len(r.Rolled))
	if len(r.Rolled) == 1 {
		s = "1 workload rolled"
	}
	if len(r.Rolled) > 0 {
		s += " (" + strings.Join(r.Rolled, ", ") + ")"
	}
	if len(r.Forbidden) > 0 {
		s += "; not allowed by the namespace's grant: " + strings.Join(r.Forbidden, ", ")
	}
	return s
}

// Roll restarts, with c, every workload of namespace that reads Secret secret (Find with r).
// What the tenant's grant forbids is said in the Result, not returned as an error; any other
// failure is an error, after the workloads restarted before it.
func Roll(ctx context.Context, r client.Reader, c client.Writer, namespace, secret string, at time.Time) (Result, error) {
	found, forbidden, err := Find(ctx, r, namespace, secret)
	if err != nil {
		return Result{}, err
	}
	res := Result{Forbidden: forbidden}
	for _, w := range found {
		err := Restart(ctx, c, w, at)
		switch {
		case apierrors.IsForbidden(err):
			res.Forbidden = append(res.Forbidden, "patch "+w.String())
		case apierrors.IsNotFound(err):
			// Deleted since it was listed: nothing to roll.
		case err != nil:
			return res, err
		default:
			res.Rolled = append(res.Rolled, w.String())
		}
	}
	return res, nil
}
