// Package objstatus is how switchboard's reconcilers (the operator's and the webhook sender's)
// write an object's status: one patch from the object as it was read, only when the reconcile
// changed it, and its conditions set with their transition times kept.
package objstatus

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Patch patches the status of obj, as the reconcile left it, from before, as it was
// read; nothing is sent when the reconcile changed nothing. The optimistic lock makes a
// reconcile that worked from a stale object fail instead of publishing its result (a key
// generation or a connection id) twice; the merge patch leaves alone the fields others write
// (the server's lastUsedAt). An object deleted meanwhile needs no status.
func Patch(ctx context.Context, c client.Client, before, obj client.Object) error {
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		kind := "object"
		if gvk, gvkErr := apiutil.GVKForObject(obj, c.Scheme()); gvkErr == nil {
			kind = gvk.Kind
		}
		return fmt.Errorf("patching the status of %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// SetCondition sets one condition of an object of the given generation; its transition time
// moves only when its status does.
func SetCondition(conds *[]metav1.Condition, generation int64, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

// ConditionReason is the reason of the condition condType, or "" when there is none.
func ConditionReason(conds []metav1.Condition, condType string) string {
	if c := meta.FindStatusCondition(conds, condType); c != nil {
		return c.Reason
	}
	return ""
}

// ConditionStatus is the status of condition condType, "" when it is absent.
func ConditionStatus(conds []metav1.Condition, condType string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, condType); c != nil {
		return c.Status
	}
	return ""
}
