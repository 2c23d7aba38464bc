// Package keywebhook is the operator's KeyWebhook controller: it checks each subscription's
// endpoint against the platform's webhook network policy and copies its signing secrets into
// the signing namespace, a namespace that holds nothing else, so that the webhook sender (the
// one component with egress) signs deliveries with a right to read the Secrets of that
// namespace only: neither tenants' Secrets nor the system namespace's. It says on the
// KeyWebhook's Ready condition when either is wrong; the sender reports on deliveries. Copies
// an older operator kept in the system namespace are deleted as each KeyWebhook is reconciled.
package keywebhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/fairqueue"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

const (
	// DefaultSecretKey is the entry of the tenant's Secret read when signingSecretRef.key is empty.
	DefaultSecretKey = "secret"
	// Resync is how often each KeyWebhook's signing secrets are read again: the operator
	// watches no tenant Secret (it would have to cache every Secret of the cluster, and the
	// data of whatever tenants put in them), so a rotation reaches deliveries within Resync.
	Resync = time.Minute
)

// Reconciler checks KeyWebhooks and keeps their signing secrets' copies.
type Reconciler struct {
	// Client reads KeyWebhooks and the copies from the cache and writes.
	Client client.Client
	// APIReader reads tenants' Secrets (never cached) and the copies' data (the cache drops it).
	APIReader client.Reader
	// SigningNamespace holds the copies, and nothing else: the sender may read its Secrets.
	SigningNamespace string
	// SystemNamespace held the copies before SigningNamespace did: those left there are deleted.
	SystemNamespace string
	// Policy is the platform's webhook network policy, the sender's own.
	Policy webhookdelivery.Policy
	// ControllerOptions are the controller's (workers, queue).
	ControllerOptions crcontroller.Options
	// ResyncPeriod is how often signing secrets are read again (Resync when 0).
	ResyncPeriod time.Duration
}

// SetupWithManager registers the reconciler with mgr: it runs on KeyWebhooks, and on their
// copies (a copy deleted by hand is made again; one left in the system namespace by an older
// operator, found as the cache starts, is deleted).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.SigningNamespace == "" || r.SigningNamespace == r.SystemNamespace {
		return fmt.Errorf("the signing secrets' copies need a namespace of their own (signing %q, system %q)", r.SigningNamespace, r.SystemNamespace)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&switchboardv1alpha1.KeyWebhook{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(ofCopy), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			ns := o.GetNamespace()
			return (ns == r.SigningNamespace || ns == r.SystemNamespace) && o.GetLabels()[keysecret.LabelComponent] == keysecret.ComponentSigning
		}))).
		Named("keywebhook").
		WithOptions(fairqueue.ControllerOptions(r.ControllerOptions)).
		Complete(r)
}

// ofCopy maps a copy to its KeyWebhook.
func ofCopy(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[keysecret.LabelWebhookNamespace] == "" || l[keysecret.LabelWebhookName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[keysecret.LabelWebhookNamespace], Name: l[keysecret.LabelWebhookName]}}}
}

// Reconcile checks one KeyWebhook's endpoint and signing secrets, keeps their copy, deletes
// copies of KeyWebhooks gone, and says on Ready what is wrong.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kw := &switchboardv1alpha1.KeyWebhook{}
	if err := r.Client.Get(ctx, req.NamespacedName, kw); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.deleteCopies(ctx, req.NamespacedName, "")
		}
		return reconcile.Result{}, err
	}
	if !kw.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.deleteCopies(ctx, req.NamespacedName, "")
	}
	// A KeyWebhook deleted and made again under the same name has a new UID: the old copy goes,
	// and so does any copy an older operator kept in the system namespace.
	if err := r.deleteCopies(ctx, req.NamespacedName, kw.UID); err != nil {
		return reconcile.Result{}, err
	}
	var problems []string
	reason := ""
	if _, err := r.Policy.ParseEndpoint(kw.Spec.URL); err != nil {
		reason = switchboardv1alpha1.ReasonWebhookInvalidEndpoint
		problems = append(problems, "spec.url: "+err.Error())
	}
	secrets, err := r.signingSecrets(ctx, kw)
	var missing *missingError
	switch {
	case errors.As(err, &missing):
		if reason == "" {
			reason = switchboardv1alpha1.ReasonWebhookSecretMissing
		}
		problems = append(problems, missing.Error())
		if err := r.deleteCopies(ctx, req.NamespacedName, ""); err != nil {
			return reconcile.Result{}, err
		}
	case err != nil:
		return reconcile.Result{}, err
	default:
		if err := r.keepCopy(ctx, kw, secrets); err != nil {
			return reconcile.Result{}, err
		}
	}

	before := kw.DeepCopy()
	kw.Status.ObservedGeneration = kw.Generation
	switch current := objstatus.ConditionReason(kw.Status.Conditions, switchboardv1alpha1.ConditionReady); {
	case reason != "":
		objstatus.SetCondition(&kw.Status.Conditions, kw.Generation, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse,
			reason, strings.Join(problems, "; "))
	case current == "" || current == switchboardv1alpha1.ReasonWebhookInvalidEndpoint || current == switchboardv1alpha1.ReasonWebhookSecretMissing:
		// The sender's reasons (Active, Gone, Failing) are the sender's to change.
		objstatus.SetCondition(&kw.Status.Conditions, kw.Generation, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue,
			switchboardv1alpha1.ReasonWebhookActive, "The endpoint and the signing secrets are valid: events are delivered as they happen.")
	}
	if err := objstatus.Patch(ctx, r.Client, before, kw); err != nil {
		return reconcile.Result{}, err
	}
	resync := r.ResyncPeriod
	if resync == 0 {
		resync = Resync
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// missingError says what is wrong with a tenant's signing secrets, without their content.
type missingError struct{ msg string }

func (e *missingError) Error() string { return e.msg }

// signingSecrets reads kw's signing secrets from its Secret, through the API server, checked
// as the sender will decode them; a *missingError says what is wrong with them.
func (r *Reconciler) signingSecrets(ctx context.Context, kw *switchboardv1alpha1.KeyWebhook) (string, error) {
	ref := kw.Spec.SigningSecretRef
	key := ref.Key
	if key == "" {
		key = DefaultSecretKey
	}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: kw.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &missingError{fmt.Sprintf("spec.signingSecretRef: Secret %q not found in namespace %s", ref.Name, kw.Namespace)}
		}
		return "", fmt.Errorf("reading the signing Secret %s/%s: %w", kw.Namespace, ref.Name, err)
	}
	v, ok := s.Data[key]
	if !ok {
		return "", &missingError{fmt.Sprintf("spec.signingSecretRef: Secret %q has no entry %q", ref.Name, key)}
	}
	secrets := strings.Join(strings.Fields(string(v)), " ")
	if _, err := webhookdelivery.NewSigner(strings.Fields(secrets)...); err != nil {
		// NewSigner's errors say which secret is wrong and how, never what it holds.
		return "", &missingError{fmt.Sprintf("spec.signingSecretRef: Secret %q, entry %q: %v", ref.Name, key, err)}
	}
	return secrets, nil
}

// keepCopy makes the copy of kw's signing secrets hold secrets.
func (r *Reconciler) keepCopy(ctx context.Context, kw *switchboardv1alpha1.KeyWebhook, secrets string) error {
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.SigningNamespace,
			Name:      keysecret.SigningSecretName(kw.UID),
			Labels: map[string]string{
				keysecret.LabelManagedBy:        keysecret.ManagedBy,
				keysecret.LabelComponent:        keysecret.ComponentSigning,
				keysecret.LabelWebhookNamespace: kw.Namespace,
				keysecret.LabelWebhookName:      kw.Name,
				keysecret.LabelWebhookUID:       string(kw.UID),
			},
		},
		Type: keysecret.TypeSigning,
		Data: map[string][]byte{keysecret.DataSigningSecrets: []byte(secrets)},
	}
	have := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("copying the signing secrets of KeyWebhook %s/%s: %w", kw.Namespace, kw.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the copy of the signing secrets of KeyWebhook %s/%s: %w", kw.Namespace, kw.Name, err)
	}
	if bytes.Equal(have.Data[keysecret.DataSigningSecrets], want.Data[keysecret.DataSigningSecrets]) && len(have.Data) == 1 {
		return nil
	}
	before := have.DeepCopy()
	have.Data = want.Data
	if err := r.Client.Patch(ctx, have, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the copy of the signing secrets of KeyWebhook %s/%s: %w", kw.Namespace, kw.Name, err)
	}
	return nil
}

// deleteCopies deletes the copies made for the KeyWebhook named name but the one of UID keep
// in the signing namespace: every one in the system namespace, where an older operator kept
// them and the sender no longer reads.
func (r *Reconciler) deleteCopies(ctx context.Context, name types.NamespacedName, keep types.UID) error {
	var list corev1.SecretList
	for _, ns := range []string{r.SigningNamespace, r.SystemNamespace} {
		var in corev1.SecretList
		if err := r.Client.List(ctx, &in, client.InNamespace(ns), client.MatchingLabels{
			keysecret.LabelComponent: keysecret.ComponentSigning, keysecret.LabelWebhookNamespace: name.Namespace, keysecret.LabelWebhookName: name.Name,
		}); err != nil {
			return fmt.Errorf("listing the signing secrets' copies of KeyWebhook %s in %s: %w", name, ns, err)
		}
		list.Items = append(list.Items, in.Items...)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if keep != "" && s.Namespace == r.SigningNamespace && s.Labels[keysecret.LabelWebhookUID] == string(keep) {
			continue
		}
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the signing secrets' copy %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}
