package controllers

import (
	"time"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/renewalwindow"
)

// firstOpenAt is the earliest instant at or after t at which one of windows is open (t itself
// when there are none); ok is false when none opens (internal/renewalwindow). The API server
// refuses windows of which none opens within the renewal period (weekly ones by CEL, cron ones
// through the operator's webhook), so a due renewal finds one before the key ends.
func firstOpenAt(windows []switchboardv1alpha1.APIKeyRenewalWindow, t time.Time) (at time.Time, ok bool) {
	return renewalwindow.Next(windows, t)
}
