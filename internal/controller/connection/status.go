package connection

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/objstatus"
)

// connectionFindings is what one reconcile of a Connection found; its Ready condition is set
// from it, once, in setConnectionConditions.
type connectionFindings struct {
	// conflictID is an id the Connection wants and holder has a better claim to.
	conflictID string
	// holder is the Connection that holds conflictID (nil: no conflict).
	holder *switchboardv1alpha1.Connection
}

// setConnectionConditions sets Ready from what the reconcile found. It is the only place that
// sets it.
func setConnectionConditions(conn *switchboardv1alpha1.Connection, f *connectionFindings) {
	switch {
	case f.holder != nil:
		objstatus.SetCondition(&conn.Status.Conditions, conn.Generation, switchboardv1alpha1.ConditionReady, metav1.ConditionFalse,
			switchboardv1alpha1.ReasonIDConflict, idConflictMessage(f.conflictID, f.holder))
	case conn.Status.ID != "":
		objstatus.SetCondition(&conn.Status.Conditions, conn.Generation, switchboardv1alpha1.ConditionReady, metav1.ConditionTrue,
			switchboardv1alpha1.ReasonIDAssigned, "the connection's public id is "+conn.Status.ID)
	}
}

// idConflictMessage says which id is taken, and by which Connection: the holder is always of the
// same namespace (ids are unique per namespace), so the message tells nothing of other tenants.
func idConflictMessage(id string, other *switchboardv1alpha1.Connection) string {
	return fmt.Sprintf("id %s is already used by Connection %s of this namespace: ids are unique in a namespace, so pick another spec.id", id, other.Name)
}
