// Package binding resolves an APIKey's spec.binding into the record the API server enforces, a
// concern of its controller: the mode, the ServiceAccounts spec.binding names together with,
// for spec.binding.consumers, those of the pods of the key's own namespace that read its
// delivery Secret (found as the workloads concern finds readers: by volume, projected volume,
// env or envFrom), the SPIFFE IDs and public keys, sorted and bounded
// (keysecret.MaxBoundServiceAccounts). The record (keysecret.DataBinding) lives in the key's
// hash Secret in the system namespace, which tenants cannot write: the server decides from it
// alone. It is written only when it changes, and removed with spec.binding.
//
// The pods are read from the API server with the rights the tenant bound in its namespace (the
// switchboard-consumer-reader ClusterRole), and watched while a key binds its consumers
// (internal/controller/apikey/podwatch), so that a new consumer's pod is bound within seconds.
package binding

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/keystate"
	"github.com/switchboard-dev/switchboard/internal/controller/apikey/workloads"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// podPage is how many pods one list request returns; maxPods bounds the pods of a namespace
// read for one key: past it, the consumers are not resolved (ConsumersNotReadable).
const (
	podPage = 500
	maxPods = 10000
)

// maxNamesShown bounds the ServiceAccounts the WorkloadBinding condition names.
const maxNamesShown = 10

// DefaultServiceAccount is the ServiceAccount of a pod that names none.
const DefaultServiceAccount = "default"

// NeedsPods says whether the reconcile of key must read the pods of its namespace: its binding
// asks for its consumers, and it is delivered into a Secret pods can read.
func NeedsPods(key *switchboardv1alpha1.APIKey) bool {
	return key.Spec.Binding != nil && key.Spec.Binding.Consumers && key.Spec.SecretName != ""
}

// ReadConsumers reads, from the API server, the ServiceAccounts of the pods of key's namespace
// that read its delivery Secret (workloads.UseOf: a secret or projected volume, env valueFrom,
// envFrom), a pod that names none counting as "default"; pods that have ended (Succeeded,
// Failed) present nothing and are left out. Only the key's own namespace is listed: a pod
// elsewhere that reads a Secret of the same name is another Secret's reader. A namespace whose
// pods switchboard may not list is Unreadable, not an error; any other failure is one, so that a
// passing fault never narrows a binding.
func ReadConsumers(ctx context.Context, reader client.Reader, key *switchboardv1alpha1.APIKey) (*keystate.BoundConsumers, error) {
	seen := map[string]bool{}
	read, cont := 0, ""
	for {
		pods := &corev1.PodList{}
		err := reader.List(ctx, pods, client.InNamespace(key.Namespace), client.Limit(podPage), client.Continue(cont))
		switch {
		case apierrors.IsForbidden(err):
			return &keystate.BoundConsumers{Unreadable: "forbidden to list pods"}, nil
		case err != nil:
			return nil, fmt.Errorf("listing the pods of namespace %s: %w", key.Namespace, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if workloads.UseOf(&p.Spec, key.Spec.SecretName).Reads() {
				seen[serviceAccountOf(p)] = true
			}
		}
		if read += len(pods.Items); read > maxPods {
			return &keystate.BoundConsumers{Unreadable: fmt.Sprintf("the namespace has more than %d pods", maxPods)}, nil
		}
		if cont = pods.Continue; cont == "" {
			break
		}
	}
	out := &keystate.BoundConsumers{ServiceAccounts: make([]string, 0, len(seen))}
	for sa := range seen {
		out.ServiceAccounts = append(out.ServiceAccounts, sa)
	}
	slices.Sort(out.ServiceAccounts)
	return out, nil
}

// serviceAccountOf is the name of the ServiceAccount pod p runs as.
func serviceAccountOf(p *corev1.Pod) string {
	if p.Spec.ServiceAccountName == "" {
		return DefaultServiceAccount
	}
	return p.Spec.ServiceAccountName
}

// Resolve is the record key's binding asks for, given the consumers read (nil: not read): nil
// for a key without spec.binding. Its ServiceAccounts are spec.binding.serviceAccounts (at
// most 16, always recorded) and the consumers' (for spec.binding.consumers), each once, sorted;
// when they are more than keysecret.MaxBoundServiceAccounts, the consumers' first ones, sorted,
// fill the record and the others are left out (dropped): a record is never wider than its bound.
func Resolve(key *switchboardv1alpha1.APIKey, bound *keystate.BoundConsumers) (want *keysecret.Binding, dropped []string) {
	b := key.Spec.Binding
	if b == nil {
		return nil, nil
	}
	want = &keysecret.Binding{Mode: b.Mode, SPIFFEIDs: slices.Clone(b.SPIFFEIDs), PublicKeys: slices.Clone(b.PublicKeys)}
	named := map[string]bool{}
	for _, sa := range b.ServiceAccounts {
		if !named[sa] {
			named[sa] = true
			want.ServiceAccounts = append(want.ServiceAccounts, sa)
		}
	}
	if b.Consumers && bound != nil {
		for _, sa := range bound.ServiceAccounts { // sorted
			switch {
			case named[sa]:
			case len(want.ServiceAccounts) >= keysecret.MaxBoundServiceAccounts:
				dropped = append(dropped, sa)
			default:
				named[sa] = true
				want.ServiceAccounts = append(want.ServiceAccounts, sa)
			}
		}
	}
	for _, l := range [][]string{want.ServiceAccounts, want.SPIFFEIDs, want.PublicKeys} {
		slices.Sort(l)
	}
	return want, dropped
}

// Want is the record s's key asks for (nil: none), for an issue to write with the key's first
// hash (issuing), so that a bound key is never a bearer key for a moment.
func Want(s *keystate.State) *keysecret.Binding {
	want, _ := Resolve(s.Key, s.Bound)
	return want
}

// Set makes hash Secret secret hold record want (nil: none).
func Set(secret *corev1.Secret, want *keysecret.Binding) {
	if want == nil {
		delete(secret.Data, keysecret.DataBinding)
		return
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[keysecret.DataBinding] = want.Encode()
}

// Holds says hash Secret secret holds record want (nil: none) exactly.
func Holds(secret *corev1.Secret, want *keysecret.Binding) bool {
	have := secret.Data[keysecret.DataBinding]
	if want == nil {
		return len(have) == 0
	}
	return bytes.Equal(have, want.Encode())
}

// Observe resolves spec.binding into the record the hash Secret should hold, says whether it
// does, and what the WorkloadBinding condition says of it; wake gets when the consumers are
// worth reading again.
func Observe(s *keystate.State, _ keystate.Params, obs *keystate.Observation) {
	key := s.Key
	want, dropped := Resolve(key, s.Bound)
	f := keystate.BindingFinding{Known: true, Want: want, Recorded: s.Hash != nil && Holds(s.Hash, want)}
	if c := s.Bound; c != nil {
		obs.Wake.At(keystate.ConsumersRecheck(c.Watched))
	}
	if want != nil {
		f.Reason, f.Message, f.Healthy = says(key, want, s.Bound, dropped)
	}
	obs.Binding = f
}

// says is what the WorkloadBinding condition says of record want once it is written: its
// reason, its message, and whether that is all spec.binding asks for.
func says(key *switchboardv1alpha1.APIKey, want *keysecret.Binding, bound *keystate.BoundConsumers, dropped []string) (reason, message string, healthy bool) {
	b := key.Spec.Binding
	switch {
	case b.Consumers && key.Spec.SecretName == "":
		return switchboardv1alpha1.ReasonConsumersNotDelivered, fmt.Sprintf("spec.binding.consumers binds the pods that read the key's delivery Secret, but the key is revealed, not delivered (spec.secretName is empty), so no pod is found; %s",
			holds(key, want)), false
	case bound != nil && bound.Unreadable != "":
		return switchboardv1alpha1.ReasonConsumersNotReadable, fmt.Sprintf("switchboard may not read the pods of namespace %s (%s), so the binding holds no consumer's ServiceAccount: bind it the Role switchboard-consumer-reader there; %s",
			key.Namespace, bound.Unreadable, holds(key, want)), false
	case len(dropped) > 0:
		return switchboardv1alpha1.ReasonBindingBounded, fmt.Sprintf("the binding records %d of %d ServiceAccounts (at most %d): the pods of ServiceAccounts %s are not bound; %s",
			len(want.ServiceAccounts), len(want.ServiceAccounts)+len(dropped), keysecret.MaxBoundServiceAccounts, names(dropped), holds(key, want)), false
	}
	return switchboardv1alpha1.ReasonBindingRecorded, holds(key, want), true
}

// holds says, for people, what record want holds and what becomes of another presenter.
func holds(key *switchboardv1alpha1.APIKey, want *keysecret.Binding) string {
	var parts []string
	if n := len(want.ServiceAccounts); n > 0 {
		parts = append(parts, fmt.Sprintf("%s %s of namespace %s", plural(n, "ServiceAccount"), names(want.ServiceAccounts), key.Namespace))
	}
	if n := len(want.SPIFFEIDs); n > 0 {
		parts = append(parts, plural(n, "SPIFFE ID"))
	}
	if n := len(want.PublicKeys); n > 0 {
		parts = append(parts, plural(n, "public key"))
	}
	whom := "no workload"
	if len(parts) > 0 {
		whom = strings.Join(parts, ", ")
	}
	other := "refused with 403 API_KEY_WRONG_WORKLOAD (Enforce)"
	if want.Mode == switchboardv1alpha1.BindingReportOnly {
		other = "admitted and counted in status.binding (ReportOnly)"
	}
	return fmt.Sprintf("the server binds the key to %s; a request from any other is %s", whom, other)
}

// names lists l, at most maxNamesShown of it.
func names(l []string) string {
	if len(l) <= maxNamesShown {
		return strings.Join(l, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(l[:maxNamesShown], ", "), len(l)-maxNamesShown)
}

// plural is "1 thing" or "n things" (the ServiceAccounts' names follow it).
func plural(n int, thing string) string {
	if n == 1 {
		return thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// Policies keep the binding record: asked after the key is issued and its record kept.
var Policies = keystate.Chain{
	{Name: "BindingOutdated", Decide: bindingOutdated},
}

// bindingOutdated: the hash Secret does not hold the record spec.binding resolves to (a binding
// added, changed or removed; a consumer's pod started or gone).
func bindingOutdated(in keystate.Input) (keystate.Decision, bool) {
	b := in.Obs.Binding
	if in.Obs.Hash != keystate.HashFound || !b.Known || b.Recorded {
		return keystate.Decision{}, false
	}
	why := "spec.binding was removed"
	if b.Want != nil {
		why = "the hash Secret does not hold the binding spec.binding resolves to"
	}
	return keystate.Decision{Do: record{want: b.Want}, Why: why}, true
}

// record writes binding record want (nil: removes it) into the hash Secret, with the hash
// Secret's resourceVersion as an optimistic lock: a write decided on an outdated read fails and
// the next reconcile resolves again.
type record struct{ want *keysecret.Binding }

func (r record) Do(ctx context.Context, env *keystate.Env, s *keystate.State, _ keystate.Decision) (keystate.Outcome, error) {
	if err := env.Patch(ctx, s.Hash, func() { Set(s.Hash, r.want) }); err != nil {
		return keystate.Outcome{}, fmt.Errorf("writing the binding record into hash Secret %s/%s: %w", s.Hash.Namespace, s.Hash.Name, err)
	}
	if r.want == nil {
		log.FromContext(ctx).Info("removed the key's binding record", "hint", s.Key.Status.KeyHint)
	} else {
		log.FromContext(ctx).Info("recorded the key's binding", "hint", s.Key.Status.KeyHint, "mode", r.want.Mode,
			"serviceAccounts", len(r.want.ServiceAccounts), "spiffeIDs", len(r.want.SPIFFEIDs), "publicKeys", len(r.want.PublicKeys))
	}
	return keystate.Outcome{BindingRecorded: true}, nil
}

// SetCondition sets WorkloadBinding from f (recorded: the reconcile's action wrote f.Want): a
// key without spec.binding has none, and a binding not resolved (a revoked key) keeps what it
// said.
func SetCondition(key *switchboardv1alpha1.APIKey, f *keystate.BindingFinding, recorded bool) {
	const cond = switchboardv1alpha1.ConditionWorkloadBinding
	switch {
	case key.Spec.Binding == nil:
		meta.RemoveStatusCondition(&key.Status.Conditions, cond)
	case !f.Known:
	case !f.Recorded && !recorded:
		objstatus.SetCondition(&key.Status.Conditions, key.Generation, cond, metav1.ConditionFalse, switchboardv1alpha1.ReasonBindingPending,
			"the binding is not recorded for the server yet: "+pendingWhy(key))
	case f.Healthy:
		objstatus.SetCondition(&key.Status.Conditions, key.Generation, cond, metav1.ConditionTrue, f.Reason, f.Message)
	default:
		objstatus.SetCondition(&key.Status.Conditions, key.Generation, cond, metav1.ConditionFalse, f.Reason, f.Message)
	}
}

// pendingWhy says why a binding is not recorded yet.
func pendingWhy(key *switchboardv1alpha1.APIKey) string {
	if key.Status.KeyGeneration == 0 {
		return "no key is issued yet"
	}
	return "it is written with the next reconcile"
}
