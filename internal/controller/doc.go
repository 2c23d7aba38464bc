// Package controller is what the operator's controllers share: what wakes a reconcile
// (MeaningfulUpdate) and the operator's RBAC markers (rbac.go). The controllers themselves are
// one package each: apikey, connection, keywebhook and keyjournal; what they share with the
// webhook sender's reconciler lives below both (internal/fairqueue, internal/objstatus).
package controller
