//go:build !unit

package panel_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/panel"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

// unusedAfter is how long the operator of TestBrowserExpiringAndUnusedKeys lets a key go unused
// before it says so: long enough for the browser to look at keys made after that, which are not
// unused yet.
const unusedAfter = 25 * time.Second

var errNotYet = errors.New("not yet")

// startSystem starts a whole system of its own (control plane, operator, /v1 server) whose
// operator finds a key Unused after unusedAfter instead of 90 days; the package's shared system
// keeps the default.
func startSystem(t *testing.T, unusedAfter time.Duration) *system.System {
	t.Helper()
	s, err := system.Start(system.Options{SystemNamespace: systemNS, Operator: func(c *configv1alpha1.OperatorConfiguration, deps *operator.Deps) {
		c.UnusedAfter = &metav1.Duration{Duration: unusedAfter}
		deps.SkipControllerNameValidation = true // the shared system's operator runs in this process too
	}})
	if err != nil {
		t.Fatalf("starting a system: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping the system: %v", err)
		}
	})
	return s
}

// waitForKeyIn waits until the APIKey of key, read through c, satisfies cond, and returns it.
func waitForKeyIn(t *testing.T, c client.Client, key *switchboardv1alpha1.APIKey, what string, cond func(*switchboardv1alpha1.APIKey) bool) *switchboardv1alpha1.APIKey {
	t.Helper()
	var k switchboardv1alpha1.APIKey
	testenv.Eventually(t, 60*time.Second, what, func() error {
		if err := c.Get(testCtx(t), client.ObjectKeyFromObject(key), &k); err != nil {
			return err
		}
		if !cond(&k) {
			return errNotYet
		}
		return nil
	})
	return &k
}

// TestBrowserExpiringAndUnusedKeys: the key list shows which keys the operator finds expiring
// soon or unused, when each key ends and is rotated next, and filters to either, in a real
// browser. The states are the real operator's: a key nobody used for unusedAfter, a revealed key
// that ends within the operator's warning period, a delivered key that renews itself.
func TestBrowserExpiringAndUnusedKeys(t *testing.T) {
	s := startSystem(t, unusedAfter)
	ns := s.Namespace(t, "browser-lifecycle")
	ctx := testCtx(t)
	in := func(d time.Duration) *metav1.Time { at := metav1.NewTime(time.Now().Add(d)); return &at }
	idle := &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "idle"), Spec: switchboardv1alpha1.APIKeySpec{Description: "Nobody calls with it"}}
	if err := s.Client.Create(ctx, idle); err != nil {
		t.Fatal(err)
	}
	idleKey := waitForKeyIn(t, s.Client, idle, "idle is Unused", func(k *switchboardv1alpha1.APIKey) bool {
		return apimeta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionUnused)
	})
	// Made now, these are not unused for another unusedAfter.
	ending := &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "ending"), Spec: switchboardv1alpha1.APIKeySpec{
		Description: "Revealed, ends in 3 days", ExpiresAt: in(3*24*time.Hour + time.Hour)}}
	fresh := &switchboardv1alpha1.APIKey{ObjectMeta: metaName(ns, "fresh"), Spec: switchboardv1alpha1.APIKeySpec{
		Description: "Delivered, renews itself", SecretName: "fresh-key",
		APIKeyLifecycle: switchboardv1alpha1.APIKeyLifecycle{Lifetime: &metav1.Duration{Duration: 720 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 168 * time.Hour}}}}
	for _, k := range []*switchboardv1alpha1.APIKey{ending, fresh} {
		if err := s.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	endingKey := waitForKeyIn(t, s.Client, ending, "ending is ExpiringSoon", func(k *switchboardv1alpha1.APIKey) bool {
		return apimeta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon)
	})
	waitForKeyIn(t, s.Client, fresh, "fresh has a renewal time", func(k *switchboardv1alpha1.APIKey) bool {
		return k.Status.RenewalTime != nil && apimeta.IsStatusConditionFalse(k.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon)
	})
	endingMessage := apimeta.FindStatusCondition(endingKey.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon).Message
	idleMessage := apimeta.FindStatusCondition(idleKey.Status.Conditions, switchboardv1alpha1.ConditionUnused).Message

	token := s.ServiceAccount(t, ns, "owner", ownerRules...).BearerToken
	h, err := panel.NewHandler(&configv1alpha1.PanelSettings{}, nil, panel.Deps{RESTConfig: s.Config})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b, problems := newBrowser(t)
	base := signInBrowser(b, t, srv.URL, token)
	do(b, t, "opening the namespace",
		chromedp.Navigate(base+"/keys?namespace="+ns),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="idle"]`)),
	)
	shown := func() string {
		return get(b, t, "reading the rows", chromedp.Evaluate[string](
			`Array.from(document.querySelectorAll('tr[data-key]')).map(r => r.dataset.key).join(',')`))
	}
	if got := shown(); got != "ending,fresh,idle" {
		t.Fatalf("the list shows %q", got)
	}
	for sel, want := range map[string]string{
		`tr[data-key="ending"] .badge.expiring`:         "Expiring soon",
		`tr[data-key="ending"] .expiring-note`:          endingMessage,
		`tr[data-key="ending"] td.next-rotation`:        "—",
		`tr[data-key="idle"] .badge.unused`:             "Unused",
		`tr[data-key="idle"] .unused-note`:              idleMessage,
		`tr[data-key="idle"] td.next-rotation`:          "—",
		`tr[data-key="fresh"] td.next-rotation`:         "in 3 weeks",
		`tr[data-key="fresh"] .key-ends`:                "key ends in 1 month",
		`#key-filters a[data-filter="all"] .count`:      "3",
		`#key-filters a[data-filter="expiring"] .count`: "1",
		`#key-filters a[data-filter="unused"] .count`:   "1",
		`#key-filters a.current`:                        "All 3",
	} {
		if got := textOf(b, t, sel); got != want {
			t.Errorf("%s says %q, want %q", sel, got, want)
		}
	}
	for name, want := range map[string]int{"fresh": 1, "ending": 2, "idle": 2} {
		if got := get(b, t, "counting badges", chromedp.Evaluate[int](`document.querySelectorAll('tr[data-key="`+name+`"] .badge').length`)); got != want {
			t.Errorf("%s has %d badges, want %d", name, got, want)
		}
	}
	// The expiry itself ends the key: no "key ends" line repeats it.
	if n := get(b, t, "counting key-ends", chromedp.Evaluate[int](`document.querySelectorAll('tr[data-key="ending"] .key-ends').length`)); n != 0 {
		t.Errorf("the expiring key shows its end twice")
	}

	do(b, t, "filtering to expiring keys",
		chromedp.Click(chromedp.CSS(`#key-filters a[data-filter="expiring"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#key-filters a.current[data-filter="expiring"]`)),
	)
	if got := shown(); got != "ending" {
		t.Fatalf("filtered to expiring keys, the list shows %q", got)
	}
	if location := get(b, t, "reading the address", chromedp.Location()); location != base+"/keys?namespace="+ns+"&show=expiring" {
		t.Errorf("the filter's address is %s", location)
	}
	do(b, t, "filtering to unused keys",
		chromedp.Click(chromedp.CSS(`#key-filters a[data-filter="unused"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#key-filters a.current[data-filter="unused"]`)),
	)
	if got := shown(); got != "idle" {
		t.Fatalf("filtered to unused keys, the list shows %q", got)
	}

	// A revoked key is no longer unused: the filtered list says none is.
	do(b, t, "revoking the unused key",
		chromedp.Click(chromedp.CSS(`tr[data-key="idle"] a[href*="/keys/revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS("#revoke-key")),
		chromedp.Click(chromedp.CSS("#revoke-key")),
		chromedp.WaitVisible(chromedp.CSS("#notice")),
		chromedp.Navigate(base+"/keys?namespace="+ns+"&show=unused"),
		chromedp.WaitVisible(chromedp.CSS(`#key-filters a.current[data-filter="unused"]`)),
	)
	if got := textOf(b, t, "table.keys td.empty"); got != "No key in this namespace is unused." {
		t.Errorf("the empty filtered list says %q", got)
	}
	do(b, t, "showing all keys again",
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
