//go:build !unit

package panel_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// setStatus waits for the operator to issue key's first key, then changes its status through
// the status subresource, as the operator's lifecycle step does.
func setStatus(t *testing.T, key *switchboardv1alpha1.APIKey, change func(*switchboardv1alpha1.APIKeyStatus)) {
	t.Helper()
	waitFor(t, func() bool {
		var k switchboardv1alpha1.APIKey
		if err := env.Client.Get(testCtx(t), client.ObjectKeyFromObject(key), &k); err != nil ||
			!apimeta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionReady) {
			return false
		}
		change(&k.Status)
		return env.Client.Status().Update(testCtx(t), &k) == nil
	})
}

// TestBrowserExpiringAndUnusedKeys: the key list shows which keys are expiring soon or unused and
// when each is rotated next, and filters to either, in a real browser.
func TestBrowserExpiringAndUnusedKeys(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "browser-lifecycle")
	keys := []switchboardv1alpha1.APIKey{
		{ObjectMeta: metaName(ns, "fresh"), Spec: switchboardv1alpha1.APIKeySpec{Description: "In use, far from its end"}},
		{ObjectMeta: metaName(ns, "ending"), Spec: switchboardv1alpha1.APIKeySpec{Description: "Renewal keeps failing", SecretName: "ending-key",
			APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: &metav1.Duration{Duration: 720 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 168 * time.Hour}}}},
		{ObjectMeta: metaName(ns, "idle"), Spec: switchboardv1alpha1.APIKeySpec{Description: "Nobody calls with it"}},
	}
	for i := range keys {
		if err := env.Client.Create(testCtx(t), &keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	in := func(d time.Duration) *metav1.Time { at := metav1.NewTime(now.Add(d)); return &at }
	condition := func(s *switchboardv1alpha1.APIKeyStatus, condType, reason, message string, status metav1.ConditionStatus) {
		apimeta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: 1})
	}
	const endingMessage = "the key ends in 3 days and its renewal has failed 2 times"
	const idleMessage = "the key has not authenticated a request for 90 days"
	setStatus(t, &keys[0], func(s *switchboardv1alpha1.APIKeyStatus) {
		s.KeyNotAfter, s.RenewalTime = in(80*24*time.Hour), in(73*24*time.Hour+time.Hour)
		condition(s, switchboardv1alpha1.ConditionExpiringSoon, switchboardv1alpha1.ReasonNotEndingSoon, "", metav1.ConditionFalse)
		condition(s, switchboardv1alpha1.ConditionUnused, switchboardv1alpha1.ReasonUsed, "", metav1.ConditionFalse)
	})
	setStatus(t, &keys[1], func(s *switchboardv1alpha1.APIKeyStatus) {
		s.KeyIssuedAt, s.KeyNotAfter, s.RenewalTime = in(-27*24*time.Hour), in(3*24*time.Hour+time.Hour), in(2*time.Hour+time.Minute)
		s.FailedRenewalAttempts = 2
		condition(s, switchboardv1alpha1.ConditionExpiringSoon, switchboardv1alpha1.ReasonEndsSoon, endingMessage, metav1.ConditionTrue)
	})
	setStatus(t, &keys[2], func(s *switchboardv1alpha1.APIKeyStatus) {
		condition(s, switchboardv1alpha1.ConditionUnused, switchboardv1alpha1.ReasonUnused, idleMessage, metav1.ConditionTrue)
	})

	token := grant(t, ns, "owner", ownerRules)
	srv := startPanel(t, panel.Options{})
	ctx, problems := newBrowser(t)
	base := signInBrowser(ctx, t, srv.URL, token)
	do(ctx, t, "opening the namespace",
		chromedp.Navigate(base+"/keys?namespace="+ns),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="idle"]`)),
	)
	shown := func() string {
		return get(ctx, t, "reading the rows", chromedp.Evaluate[string](
			`Array.from(document.querySelectorAll('tr[data-key]')).map(r => r.dataset.key).join(',')`))
	}
	if got := shown(); got != "ending,fresh,idle" {
		t.Fatalf("the list shows %q", got)
	}
	for sel, want := range map[string]string{
		`tr[data-key="ending"] .badge.expiring`:         "Expiring soon",
		`tr[data-key="ending"] .expiring-note`:          endingMessage,
		`tr[data-key="ending"] td.next-rotation`:        "in 2 hours",
		`tr[data-key="ending"] .key-ends`:               "key ends in 3 days",
		`tr[data-key="idle"] .badge.unused`:             "Unused",
		`tr[data-key="idle"] .unused-note`:              idleMessage,
		`tr[data-key="idle"] td.next-rotation`:          "—",
		`tr[data-key="fresh"] td.next-rotation`:         "in 2 months",
		`#key-filters a[data-filter="all"] .count`:      "3",
		`#key-filters a[data-filter="expiring"] .count`: "1",
		`#key-filters a[data-filter="unused"] .count`:   "1",
		`#key-filters a.current`:                        "All 3",
	} {
		if got := textOf(ctx, t, sel); got != want {
			t.Errorf("%s says %q, want %q", sel, got, want)
		}
	}
	badges := get(ctx, t, "counting badges", chromedp.Evaluate[int](`document.querySelectorAll('tr[data-key="fresh"] .badge').length`))
	if badges != 1 {
		t.Errorf("the fresh key has %d badges, want its state alone", badges)
	}

	do(ctx, t, "filtering to expiring keys",
		chromedp.Click(chromedp.CSS(`#key-filters a[data-filter="expiring"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#key-filters a.current[data-filter="expiring"]`)),
	)
	if got := shown(); got != "ending" {
		t.Fatalf("filtered to expiring keys, the list shows %q", got)
	}
	if location := get(ctx, t, "reading the address", chromedp.Location()); location != base+"/keys?namespace="+ns+"&show=expiring" {
		t.Errorf("the filter's address is %s", location)
	}
	do(ctx, t, "filtering to unused keys",
		chromedp.Click(chromedp.CSS(`#key-filters a[data-filter="unused"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#key-filters a.current[data-filter="unused"]`)),
	)
	if got := shown(); got != "idle" {
		t.Fatalf("filtered to unused keys, the list shows %q", got)
	}

	// Revoking the unused key: it is no longer unused, and the filtered list says none is.
	do(ctx, t, "revoking the unused key",
		chromedp.Click(chromedp.CSS(`tr[data-key="idle"] a[href*="/keys/revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS("#revoke-key")),
		chromedp.Click(chromedp.CSS("#revoke-key")),
		chromedp.WaitVisible(chromedp.CSS("#notice")),
		chromedp.Navigate(base+"/keys?namespace="+ns+"&show=unused"),
		chromedp.WaitVisible(chromedp.CSS(`#key-filters a.current[data-filter="unused"]`)),
	)
	if got := textOf(ctx, t, "table.keys td.empty"); got != "No key in this namespace is unused." {
		t.Errorf("the empty filtered list says %q", got)
	}
	do(ctx, t, "showing all keys again",
		chromedp.Click(chromedp.CSS(`#key-filters a[data-filter="all"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#key-filters a.current[data-filter="all"]`)),
	)
	if got := shown(); got != "ending,fresh,idle" {
		t.Fatalf("all keys: the list shows %q", got)
	}
	if p := problems.String(); p != "" {
		t.Fatalf("the browser reported problems:\n%s", p)
	}
}
