// Package controller is what switchboard's controllers share: what wakes a reconcile
// (MeaningfulUpdate) and the queue that takes namespaces in turn (FairOptions), how a reconcile
// writes its status (PatchStatus, SetCondition), and the operator's RBAC markers (rbac.go). The
// controllers themselves are one package each: apikey and connection.
package controller
