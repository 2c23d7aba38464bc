package panel

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
)

// layout is what every page's frame shows.
type layout struct {
	Title     string
	User      string
	CSRF      string
	Namespace string
	// ReplaceURL, when set, is written into the browser's history in place of the POST that
	// produced the page, so that reloading shows the plain page (and never posts again).
	ReplaceURL string
}

// pageNames are the templates under templates/, each rendered inside layout.html.
var pageNames = []string{"login", "keys", "rotate", "revoke"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{"graceChoices": func() []choice { return graceChoices }}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes a whole page or, if the template fails, a plain error: never half a page.
// Every page is personal and some show a key, so none may be stored by a browser or proxy.
func (h *handler) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout.html", data); err != nil {
		h.deps.Logger.Error(err, "rendering a page", "page", name)
		http.Error(w, "the panel failed to render this page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// timeView is an instant as a table cell: relative text, and the exact time on hover.
type timeView struct {
	Text string
	Full string
	ISO  string
}

func viewTime(t *metav1.Time, now time.Time, none string) timeView {
	if t == nil || t.IsZero() {
		return timeView{Text: none}
	}
	return timeView{
		Text: relative(t.Time, now),
		Full: t.UTC().Format("2006-01-02 15:04:05 UTC"),
		ISO:  t.UTC().Format(time.RFC3339),
	}
}

// relative says "5 minutes ago" or "in 3 days", in the largest whole unit.
func relative(t, now time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + humanDuration(-d)
	}
	if d < time.Minute {
		return "just now"
	}
	return humanDuration(d) + " ago"
}

// humanDuration rounds down to the largest unit that fits, after rounding to the minute, so
// that a key created to expire in a year says "in 1 year" a few seconds later.
func humanDuration(d time.Duration) string {
	if d >= time.Minute {
		d = d.Round(time.Minute)
	}
	units := []struct {
		size time.Duration
		name string
	}{
		{365 * 24 * time.Hour, "year"},
		{30 * 24 * time.Hour, "month"},
		{7 * 24 * time.Hour, "week"},
		{24 * time.Hour, "day"},
		{time.Hour, "hour"},
		{time.Minute, "minute"},
		{time.Second, "second"},
	}
	for _, u := range units {
		if n := int64(d / u.size); n >= 1 {
			if n == 1 {
				return "1 " + u.name
			}
			return fmt.Sprintf("%d %ss", n, u.name)
		}
	}
	return "less than a second"
}

// keyRow is one APIKey in the table.
type keyRow struct {
	Name        string
	Description string
	Hint        string
	State       string
	StateClass  string
	Notes       []string
	Created     timeView
	LastUsed    timeView
	Expires     timeView
	// RateLimit, Sources and Audiences are the key's policy ("100/1m,burst=20",
	// "10.0.0.0/8, …", "billing, connections"), each empty when it has none.
	RateLimit string
	Sources   string
	Audiences string
	CanRotate bool
	CanRevoke bool
	CanReveal bool
	// KeyEnds is when the current key stops being accepted (status.keyNotAfter), shown under
	// Expires when it comes before the APIKey's own expiry.
	KeyEnds timeView
	// NextRotation is when a new key is issued into the delivery Secret (status.renewalTime).
	NextRotation timeView
	// Expiring and Unused are the operator's ExpiringSoon and Unused conditions, with their
	// messages; only a key that can still be used is either.
	Expiring        bool
	ExpiringMessage string
	Unused          bool
	UnusedMessage   string
	// Credits is the balance the API server last wrote ("37 of 100 credits left", "… in pool
	// team" for a key spending an APIKeyCreditPool's), and
	// CreditsRefill when its period ends; empty for a key without a balance written.
	Credits       string
	CreditsRefill timeView
}

// stateBadge is the label and CSS class of a key's one-word state (keyclient.State).
func stateBadge(state keyclient.KeyState) (label, class string) {
	switch state {
	case keyclient.StateActive:
		return "Active", "active"
	case keyclient.StateIssuing, keyclient.StateRotating, keyclient.StateDeleting:
		return string(state), "pending"
	case keyclient.StateRevoked:
		return "Revoked", "revoked"
	case keyclient.StateExpired:
		return "Expired", "expired"
	case keyclient.StateDeliveryConflict:
		return "Delivery conflict", "error"
	}
	return string(state), "error"
}

// keyNotes are the facts beside the state that a person acts on.
func keyNotes(k *switchboardv1alpha1.APIKey, now time.Time) []string {
	var notes []string
	if k.Status.RevealSecretName != "" && !k.Spec.Revoked {
		notes = append(notes, "Key not yet shown")
	}
	if k.Spec.SecretName != "" {
		notes = append(notes, "Delivered to Secret "+k.Spec.SecretName)
	}
	if v := k.Status.PreviousKeyValidUntil; v != nil && now.Before(v.Time) && !k.Spec.Revoked {
		notes = append(notes, "Previous key expires "+relative(v.Time, now))
	}
	return notes
}

func newKeyRow(k *switchboardv1alpha1.APIKey, now time.Time) keyRow {
	state, class := stateBadge(keyclient.State(k, now))
	hint := k.Status.KeyHint
	if hint == "" {
		hint = "—"
	}
	live := keyclient.Live(k)
	row := keyRow{
		Name:        k.Name,
		Description: k.Spec.Description,
		Hint:        hint,
		State:       state,
		StateClass:  class,
		Notes:       keyNotes(k, now),
		Created:     viewTime(keyclient.CreatedAt(k), now, "—"),
		LastUsed:    viewTime(k.Status.LastUsedAt, now, "Never"),
		Expires:     viewTime(k.Spec.ExpiresAt, now, "Never"),
		RateLimit:   keyclient.FormatRateLimit(k.Spec.RateLimit),
		Sources:     strings.ReplaceAll(keyclient.FormatSourceRanges(k.Spec.AllowedSourceRanges), ",", ", "),
		Audiences:   strings.ReplaceAll(keyclient.FormatAudiences(k.Spec.Audiences), ",", ", "),
		CanRotate:   live,
		CanRevoke:   live,
		CanReveal:   live && keyclient.RevealStatus(k) == keyclient.RevealClaimable,
	}
	lifecycleOfRow(&row, k, now)
	if c := k.Status.Credits; c != nil && now.Before(c.PeriodEnd.Time) {
		row.Credits = fmt.Sprintf("%d of %d credits left", c.Remaining, c.Used+c.Remaining)
		if k.Spec.CreditPool != "" {
			row.Credits += " in pool " + k.Spec.CreditPool
		}
		row.CreditsRefill = viewTime(&c.PeriodEnd, now, "")
	}
	return row
}

// lifecycleOfRow fills in the row's lifecycle: when the current key ends and is renewed, and
// whether it is expiring soon or unused, as the operator's conditions say. A key that is
// revoked, expired or being deleted is none of these: nothing more will happen to it.
func lifecycleOfRow(row *keyRow, k *switchboardv1alpha1.APIKey, now time.Time) {
	switch keyclient.State(k, now) {
	case keyclient.StateRevoked, keyclient.StateExpired, keyclient.StateDeleting:
		row.NextRotation = timeView{Text: "—"}
		return
	}
	if end := k.Status.KeyNotAfter; end != nil && (k.Spec.ExpiresAt == nil || end.Before(k.Spec.ExpiresAt)) {
		row.KeyEnds = viewTime(end, now, "")
	}
	row.NextRotation = viewTime(k.Status.RenewalTime, now, "—")
	if c := apimeta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon); c != nil && c.Status == metav1.ConditionTrue {
		row.Expiring, row.ExpiringMessage = true, c.Message
	}
	if c := apimeta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionUnused); c != nil && c.Status == metav1.ConditionTrue {
		row.Unused, row.UnusedMessage = true, c.Message
	}
}

// Filters of the key list (the show query parameter).
const (
	filterAll      = ""
	filterExpiring = "expiring"
	filterUnused   = "unused"
)

// keyFilter is one choice above the key list: all keys, the expiring ones, the unused ones.
type keyFilter struct {
	Value   string
	Label   string
	Count   int
	Current bool
	URL     string
}

// filterKeys keeps the rows that filter picks, and returns the choices with their counts.
// An unknown filter shows every key.
func filterKeys(rows []keyRow, ns, filter string) ([]keyRow, []keyFilter, string) {
	if filter != filterExpiring && filter != filterUnused {
		filter = filterAll
	}
	picks := func(r keyRow, f string) bool {
		switch f {
		case filterExpiring:
			return r.Expiring
		case filterUnused:
			return r.Unused
		}
		return true
	}
	choices := []keyFilter{
		{Value: filterAll, Label: "All"},
		{Value: filterExpiring, Label: "Expiring soon"},
		{Value: filterUnused, Label: "Unused"},
	}
	for i := range choices {
		c := &choices[i]
		for _, r := range rows {
			if picks(r, c.Value) {
				c.Count++
			}
		}
		c.Current = c.Value == filter
		c.URL = keysURL(ns)
		if c.Value != filterAll {
			c.URL += "&show=" + c.Value
		}
	}
	kept := make([]keyRow, 0, len(rows))
	for _, r := range rows {
		if picks(r, filter) {
			kept = append(kept, r)
		}
	}
	return kept, choices, filter
}

func keyRows(keys []switchboardv1alpha1.APIKey, now time.Time) []keyRow {
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name < keys[j].Name })
	rows := make([]keyRow, 0, len(keys))
	for i := range keys {
		rows = append(rows, newKeyRow(&keys[i], now))
	}
	return rows
}

// connRow is one Connection in the read-only table.
type connRow struct {
	ID          string
	Name        string
	DisplayName string
	Provider    string
	Ready       string
	ReadyClass  string
}

func connRows(conns []switchboardv1alpha1.Connection) []connRow {
	sort.Slice(conns, func(i, j int) bool { return conns[i].Name < conns[j].Name })
	rows := make([]connRow, 0, len(conns))
	for i := range conns {
		c := &conns[i]
		row := connRow{ID: c.Status.ID, Name: c.Name, DisplayName: c.Spec.DisplayName, Provider: c.Spec.Provider, Ready: "Pending", ReadyClass: "pending"}
		if row.ID == "" {
			row.ID = "—"
		}
		if row.Provider == "" {
			row.Provider = "—"
		}
		if cond := apimeta.FindStatusCondition(c.Status.Conditions, switchboardv1alpha1.ConditionReady); cond != nil {
			switch cond.Status {
			case metav1.ConditionTrue:
				row.Ready, row.ReadyClass = "Ready", "active"
			case metav1.ConditionFalse:
				row.Ready, row.ReadyClass = cond.Reason, "error"
			}
		}
		rows = append(rows, row)
	}
	return rows
}
