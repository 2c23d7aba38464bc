package plugin

// How `kubectl switchboard key status` prints its report for people (keystatus.go gathers it).

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
)

// printKeyReport writes the report as text, in sections as kubectl describe does.
func printKeyReport(out io.Writer, r *keyReport, now time.Time) error {
	w := printers.GetNewTabWriter(out)
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%s:\t%s\n", label, fmt.Sprintf(format, args...))
	}
	line("Name", "%s", r.Name)
	line("Namespace", "%s", r.Namespace)
	if r.Description != "" {
		line("Description", "%s", r.Description)
	}
	line("State", "%s", r.State)
	line("Created", "%s", when(r.CreatedAt, now, "-"))
	line("Expires", "%s", when(r.ExpiresAt, now, "never (no spec.expiresAt)"))
	if r.RevokedAt != nil {
		line("Revoked", "%s", when(r.RevokedAt, now, "-"))
	}

	fmt.Fprintln(w, "Current key:")
	k := r.Key
	if k.Generation == 0 {
		line("  Key", "none issued yet")
	} else {
		line("  Key", "%s (generation %d)", orDash(k.Hint), k.Generation)
	}
	line("  Issued", "%s", when(k.IssuedAt, now, "-"))
	line("  Ends", "%s", when(k.NotAfter, now, "does not end on its own"))
	line("  Renewal", "%s", when(k.RenewalTime, now, "none scheduled"))
	line("  Failed renewals", "%d", k.FailedRenewalAttempts)
	line("  Last used", "%s", when(k.LastUsedAt, now, "never"))
	if k.RotatedAt != nil {
		line("  Rotated", "%s", when(k.RotatedAt, now, "-"))
	}
	if v := k.PreviousKeyValidUntil; v != nil && now.Before(v.Time) {
		line("  Previous key", "generation %d, valid until %s", k.Generation-1, when(v, now, "-"))
		line("  Previous key last used", "%s", when(k.PreviousKeyLastUsedAt, now, "not since the rotation"))
		if k.GraceEvidence != "" {
			line("  Previous key held by", "%s", oneLine(k.GraceEvidence))
		}
	}
	if k.RotationRequestedAt != "" {
		line("  Rotation", "requested (%s), not carried out yet", k.RotationRequestedAt)
	}
	line("Lifecycle", "%s", lifecycleText(r.Lifecycle))

	line("Delivery", "%s", deliveryText(r.Delivery, k.Generation))
	line("Reveal", "%s", revealText(r, now))

	fmt.Fprintln(w, "Policy:")
	line("  Rate limit", "%s", cmp.Or(r.Policy.RateLimit, "none"))
	line("  Source ranges", "%s", cmp.Or(strings.Join(r.Policy.AllowedSourceRanges, ", "), "anywhere"))
	line("  Audiences", "%s", cmp.Or(strings.Join(r.Policy.Audiences, ", "), "every audience"))
	if r.Policy.CreditsPerPeriod != 0 || r.Policy.Credits != nil || r.Policy.CreditPool != "" {
		line("  Credits", "%s", creditsText(r.Policy, now))
	}

	if b := r.Binding; b != nil {
		fmt.Fprintln(w, "Binding:")
		line("  Mode", "%s", bindingModeText(b.Mode))
		line("  Bound to", "%s", boundToText(b))
		line("  Misuses", "%s", misusesText(b, now))
	}

	// The tables are aligned on their own, not with the labels above.
	if err := w.Flush(); err != nil {
		return err
	}
	if b := r.Binding; b != nil {
		if err := printPresenters(out, b, now); err != nil {
			return err
		}
	}
	w = printers.GetNewTabWriter(out)
	if len(r.Conditions) == 0 {
		fmt.Fprintln(w, "Conditions:\tnone yet (the operator has not seen this APIKey)")
	} else {
		fmt.Fprintln(w, "Conditions:")
		fmt.Fprintln(w, "  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
		for _, c := range r.Conditions {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orDash(c.Reason), ago(&c.LastTransitionTime, now), orDash(oneLine(c.Message)))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	w = printers.GetNewTabWriter(out)
	switch {
	case r.EventsError != "":
		fmt.Fprintf(w, "Events:\tnot shown: %s\n", r.EventsError)
	case len(r.Events) == 0:
		fmt.Fprintln(w, "Events:\tnone (Events are kept for an hour by default)")
	default:
		fmt.Fprintln(w, "Events:")
		fmt.Fprintln(w, "  TYPE\tREASON\tAGE\tFROM\tMESSAGE")
		for _, e := range r.Events {
			seen := ago(&e.LastSeen, now)
			if e.Count > 1 {
				seen += fmt.Sprintf(" (x%d over %s)", e.Count, age(e.FirstSeen, now))
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, seen, orDash(e.From), oneLine(e.Message))
		}
	}
	return w.Flush()
}

// when is an instant as RFC 3339 with how long from now: "2026-12-01T10:00:00Z (in 5d)".
// creditsText is the balance as the API server last wrote it, or that the period it counted
// has ended since (the next use writes the new one); for a key of a pool, the pool's, named.
func creditsText(p keyReportPolicy, now time.Time) string {
	if p.CreditPool != "" {
		pool := "pool " + p.CreditPool + ", shared: "
		if p.Credits == nil {
			return pool + "none counted yet"
		}
		p.CreditPool = ""
		return pool + creditsText(p, now)
	}
	c := p.Credits
	switch {
	case c == nil:
		return fmt.Sprintf("%d a period; none counted yet", p.CreditsPerPeriod)
	case !now.Before(c.PeriodEnd.Time):
		return fmt.Sprintf("refilled at %s (%d used in the period before; no use recorded since)", when(&c.PeriodEnd, now, "-"), c.Used)
	}
	return fmt.Sprintf("%d of %d left this period (refill at %s; counted %s)",
		c.Remaining, c.Used+c.Remaining, when(&c.PeriodEnd, now, "-"), when(&c.ObservedAt, now, "-"))
}

// bindingModeText says what the mode does to a request that proves no bound workload.
func bindingModeText(mode string) string {
	switch switchboardv1alpha1.BindingMode(mode) {
	case switchboardv1alpha1.BindingReportOnly:
		return mode + " (a request that proves no bound workload is admitted, counted and reported)"
	case switchboardv1alpha1.BindingEnforce:
		return mode + " (a request that proves no bound workload is refused: 403 API_KEY_WRONG_WORKLOAD)"
	}
	return "none (spec.binding removed; the counts below are from before)"
}

// boundToText lists what the binding names.
func boundToText(b *keyReportBinding) string {
	var parts []string
	if b.Consumers {
		parts = append(parts, "the pods reading its delivery Secret")
	}
	if len(b.ServiceAccounts) > 0 {
		parts = append(parts, "ServiceAccounts "+strings.Join(b.ServiceAccounts, ", "))
	}
	if len(b.SPIFFEIDs) > 0 {
		parts = append(parts, "SPIFFE IDs "+strings.Join(b.SPIFFEIDs, ", "))
	}
	if len(b.PublicKeys) > 0 {
		parts = append(parts, "public keys "+strings.Join(b.PublicKeys, ", "))
	}
	return cmp.Or(strings.Join(parts, "; "), "-")
}

// misusesText is how many requests proved no bound workload and when the last was, as the API
// server last counted, with the operator's last report of them.
func misusesText(b *keyReportBinding, now time.Time) string {
	if b.ObservedAt == nil {
		return "none counted yet (the API server writes the counts with lastUsedAt)"
	}
	if b.Misuses == 0 {
		return "none"
	}
	s := fmt.Sprintf("%d, the last %s", b.Misuses, when(b.LastMisuseAt, now, "-"))
	if b.MisuseReportedAt != nil {
		s += "; last reported (apikey.misused) " + when(b.MisuseReportedAt, now, "-")
	}
	return s
}

// printPresenters writes who presented the key lately, one row each, the most recent first.
func printPresenters(out io.Writer, b *keyReportBinding, now time.Time) error {
	w := printers.GetNewTabWriter(out)
	switch {
	case b.ObservedAt == nil:
	case len(b.Presenters) == 0:
		fmt.Fprintf(w, "Presented by (last period):\tnobody (counted %s)\n", when(b.ObservedAt, now, "-"))
	default:
		fmt.Fprintf(w, "Presented by (last period, counted %s):\n", when(b.ObservedAt, now, "-"))
		fmt.Fprintln(w, "  PRINCIPAL\tADDRESS\tREQUESTS\tLAST SEEN\tBOUND")
		for _, p := range b.Presenters {
			bound := "no"
			if p.Bound {
				bound = "yes"
			}
			fmt.Fprintf(w, "  %s\t%s\t%d\t%s\t%s\n", cmp.Or(p.Principal, "no proof"), orDash(p.Address), p.Requests, ago(&p.LastSeen, now), bound)
		}
	}
	return w.Flush()
}

func when(t *metav1.Time, now time.Time, none string) string {
	if t == nil || t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339) + " (" + until(t, now) + ")"
}

func formatDuration(d *metav1.Duration) string {
	if d == nil {
		return ""
	}
	return keyclient.FormatPeriod(d.Duration)
}

// formatWindow writes a renewal window in one line: "Monday,Friday 02:00+2h Europe/Paris",
// "every day 02:00+2h UTC", or "cron 0 2 * * 1-5 +2h Europe/Paris".
func formatWindow(w switchboardv1alpha1.APIKeyRenewalWindow) string {
	if w.Cron != "" {
		return fmt.Sprintf("cron %s +%s %s", w.Cron, keyclient.FormatPeriod(w.Duration.Duration), cmp.Or(w.TimeZone, "UTC"))
	}
	days := "every day"
	if len(w.Days) > 0 {
		names := make([]string, len(w.Days))
		for i, d := range w.Days {
			names[i] = string(d)
		}
		days = strings.Join(names, ",")
	}
	return fmt.Sprintf("%s %s+%s %s", days, w.Start, keyclient.FormatPeriod(w.Duration.Duration), cmp.Or(w.TimeZone, "UTC"))
}

func lifecycleText(l keyReportLifecycle) string {
	var parts []string
	if l.Lifetime == "" {
		parts = append(parts, "no lifetime (a key lasts until expiresAt, a rotation or a revocation)")
	} else {
		s := "each key lasts " + l.Lifetime
		switch {
		case l.RenewBefore != "":
			s += ", renewed " + l.RenewBefore + " before its end"
		case l.RenewBeforePercentage != nil:
			s += fmt.Sprintf(", renewed %d%% of it before its end", *l.RenewBeforePercentage)
		}
		if len(l.RenewalWindows) > 0 {
			s += ", in a window: " + strings.Join(l.RenewalWindows, "; ")
		}
		parts = append(parts, s)
	}
	if l.RevokeWhenUnusedFor != "" {
		parts = append(parts, "revoked once unused for "+l.RevokeWhenUnusedFor)
	}
	if l.GraceEndsWhenUnusedFor != "" {
		parts = append(parts, "an old key's grace ends once it is unused for "+l.GraceEndsWhenUnusedFor+" and its pods restarted")
	}
	return strings.Join(parts, "; ")
}

func deliveryText(d keyReportDelivery, generation int64) string {
	if d.SecretName == "" {
		return "none: the key is revealed once (no spec.secretName)"
	}
	s := fmt.Sprintf("Secret %q, data key %q: ", d.SecretName, keysecret.DataKey)
	switch d.Secret {
	case secretExists:
		s += "exists"
		if d.SecretGeneration != 0 && d.SecretGeneration != generation {
			s += fmt.Sprintf(", holds key generation %d (the current is %d)", d.SecretGeneration, generation)
		} else if d.SecretGeneration != 0 {
			s += fmt.Sprintf(", holds key generation %d", d.SecretGeneration)
		}
		return s
	case secretMissing:
		return s + "missing; " + d.Message
	case secretForeign:
		return s + "taken: " + d.Message
	}
	return s + "unknown: " + d.Message
}

func revealText(r *keyReport, now time.Time) string {
	switch r.Reveal.State {
	case revealClaimable:
		return fmt.Sprintf("waiting to be claimed from Secret %q until %s: `kubectl switchboard key reveal %s`",
			r.Reveal.SecretName, when(r.Reveal.ExpiresAt, now, "-"), r.Name)
	case revealDelivered:
		return "delivered (not revealed: the key is in the delivery Secret)"
	case revealClaimed:
		return "claimed (the key was shown once and is not kept)"
	case revealExpired:
		return "expired unclaimed: nobody has the key; rotate for a new one"
	case revealNone:
		return "none: the key is " + strings.ToLower(r.State)
	}
	return "waiting for the operator to issue the key"
}
