//go:build !unit

package plugin

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/operator"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/testenv/system"
)

var errNotYet = errors.New("not yet")

// lineWith is the first line of out that contains s, trimmed.
func lineWith(out, s string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// startSystem starts a whole system of its own (control plane, operator, /v1 server) whose
// operator finds a key Unused after unusedAfter instead of 90 days, for the tests that need a
// key to go unused; the package's shared system keeps the default.
func startSystem(t *testing.T, unusedAfter time.Duration) *system.System {
	t.Helper()
	s, err := system.Start(system.Options{Operator: func(c *configv1alpha1.OperatorConfiguration, deps *operator.Deps) {
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

// keyOf reads an APIKey through c.
func keyOf(t *testing.T, c client.Client, ns, name string) *switchboardv1alpha1.APIKey {
	t.Helper()
	var k switchboardv1alpha1.APIKey
	if err := c.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, &k); err != nil {
		t.Fatalf("reading APIKey %s/%s: %v", ns, name, err)
	}
	return &k
}

// waitForKey waits until the APIKey ns/name, read through c, satisfies cond.
func waitForKey(t *testing.T, c client.Client, ns, name, what string, cond func(*switchboardv1alpha1.APIKey) bool) *switchboardv1alpha1.APIKey {
	t.Helper()
	var k *switchboardv1alpha1.APIKey
	testenv.Eventually(t, 60*time.Second, what, func() error {
		if k = keyOf(t, c, ns, name); !cond(k) {
			return errNotYet
		}
		return nil
	})
	return k
}

// rfc3339 is how key status writes an instant.
func rfc3339(t *metav1.Time) string { return t.UTC().Format(time.RFC3339) }

func TestKeyStatusShowsEverything(t *testing.T) {
	ns := env.Namespace(t, "status")
	mustSucceed(t, admin(t, ns, "key", "create", "worker", "--secret-name", "worker-key", "--description", "Queue worker",
		"--rate-limit", "100/1m", "--burst", "20", "--allowed-source-ranges", "10.0.0.0/8", "--timeout", "30s"))
	key := getAPIKey(t, ns, "worker")
	before := key.DeepCopy()
	key.Spec.Lifetime = &metav1.Duration{Duration: 720 * time.Hour}
	key.Spec.RenewBefore = &metav1.Duration{Duration: 168 * time.Hour}
	key.Spec.RevokeWhenUnusedFor = &metav1.Duration{Duration: 1080 * time.Hour}
	key.Spec.Audiences = []switchboardv1alpha1.Audience{"connections", "billing"}
	if err := env.Client.Patch(testContext(t), key, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// The operator records the key's life: issued now, ends in 30 days, renewed 7 days before.
	k := waitForKey(t, env.Client, ns, "worker", "the operator records the lifetime", func(k *switchboardv1alpha1.APIKey) bool {
		c := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon)
		return k.Status.RenewalTime != nil && k.Status.KeyNotAfter != nil && k.Status.KeyIssuedAt != nil && c != nil && c.ObservedGeneration == k.Generation
	})
	if d := k.Status.KeyNotAfter.Sub(k.Status.KeyIssuedAt.Time); d != 720*time.Hour {
		t.Fatalf("the operator recorded a lifetime of %s", d)
	}

	r := admin(t, ns, "key", "status", "worker")
	mustSucceed(t, r)
	out := r.stdout
	for _, want := range []string{
		"Name:", "worker", "Namespace:", ns, "Description:", "Queue worker", "State:", "Active",
		k.Status.KeyHint + " (generation 1)",
		"Issued:", rfc3339(k.Status.KeyIssuedAt), "Ends:", rfc3339(k.Status.KeyNotAfter) + " (in 29d",
		"Renewal:", rfc3339(k.Status.RenewalTime) + " (in 22d", "Failed renewals:", "0",
		"Last used:", "never",
		"each key lasts 720h, renewed 168h before its end; revoked once unused for 1080h",
		`Secret "worker-key", data key "apiKey": exists, holds key generation 1`,
		"delivered (not revealed",
		"Rate limit:", "100/1m,burst=20", "Source ranges:", "10.0.0.0/8", "Audiences:", "connections, billing",
		"ExpiringSoon", "False", "NotEndingSoon", "renews itself at " + rfc3339(k.Status.RenewalTime),
		"Unused", "UsedRecently",
		"Ready", "KeyIssued",
		// The operator's own Event, recorded with events.k8s.io/v1 and read here.
		"Normal", "KeyCreated", "switchboard-operator", "issued key " + k.Status.KeyHint,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("key status lacks %q:\n%s", want, out)
		}
	}
	// Conditions are listed Ready, ExpiringSoon, Unused, Revealed.
	if i, j, l := strings.Index(out, "ExpiringSoon"), strings.Index(out, "Unused  "), strings.Index(out, "Revealed  "); i < 0 || j < i || l < j {
		t.Errorf("conditions out of order:\n%s", out)
	}
	if r.stderr != "" {
		t.Errorf("stderr: %q", r.stderr)
	}

	// -o json: the same facts, for scripts; -o yaml parses too.
	r = admin(t, ns, "key", "status", "worker", "-o", "json")
	mustSucceed(t, r)
	var got keyReport
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("-o json is not JSON: %v: %q", err, r.stdout)
	}
	if got.Key.Hint != k.Status.KeyHint || got.Key.Generation != 1 || got.Key.FailedRenewalAttempts != 0 ||
		!got.Key.NotAfter.Equal(k.Status.KeyNotAfter) || !got.Key.RenewalTime.Equal(k.Status.RenewalTime) || !got.Key.IssuedAt.Equal(k.Status.KeyIssuedAt) ||
		got.Delivery.Secret != secretExists || got.Delivery.SecretGeneration != 1 || got.Reveal.State != revealDelivered ||
		got.Lifecycle.Lifetime != "720h" || got.Policy.RateLimit != "100/1m,burst=20" || len(got.Policy.Audiences) != 2 {
		t.Fatalf("-o json: %+v", got)
	}
	if !meta.IsStatusConditionFalse(got.Conditions, switchboardv1alpha1.ConditionExpiringSoon) || !meta.IsStatusConditionFalse(got.Conditions, switchboardv1alpha1.ConditionUnused) {
		t.Fatalf("-o json conditions: %+v", got.Conditions)
	}
	if len(got.Events) == 0 || got.Events[0].Reason != "KeyCreated" || got.Events[0].Count != 1 || got.Events[0].LastSeen.IsZero() {
		t.Fatalf("-o json events: %+v", got.Events)
	}
	r = admin(t, ns, "key", "status", "worker", "-o", "yaml")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "failedRenewalAttempts: 0") || !strings.Contains(r.stdout, "reason: KeyCreated") {
		t.Fatalf("-o yaml:\n%s", r.stdout)
	}
	mustFail(t, admin(t, ns, "key", "status", "worker", "-o", "wide"), `unsupported output format "wide"`)
	mustFail(t, admin(t, ns, "key", "status", "nope"), `APIKey "nope" not found in namespace "`+ns+`"`)

	// A revealed key that ends in 3 days, within the operator's warning (7 days), with nothing
	// to renew it: ExpiringSoon, and the Warning Event of that transition.
	mustSucceed(t, admin(t, ns, "key", "create", "ending", "--expires-in", "72h", "--timeout", "30s"))
	ending := waitForKey(t, env.Client, ns, "ending", "ExpiringSoon", func(k *switchboardv1alpha1.APIKey) bool {
		return meta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon)
	})
	warning := meta.FindStatusCondition(ending.Status.Conditions, switchboardv1alpha1.ConditionExpiringSoon)
	testenv.Eventually(t, 30*time.Second, "the KeyExpiringSoon Event", func() error {
		r = admin(t, ns, "key", "status", "ending")
		if r.code != 0 || !strings.Contains(r.stdout, "KeyExpiringSoon") {
			return errNotYet
		}
		return nil
	})
	for _, want := range []string{
		"Expires:", rfc3339(ending.Spec.ExpiresAt) + " (in 2d23h", "Ends:", rfc3339(ending.Status.KeyNotAfter), "Renewal:", "none scheduled",
		"ExpiringSoon", "True", switchboardv1alpha1.ReasonEndsSoon, warning.Message,
		"Warning", "KeyExpiringSoon", "switchboard-operator",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("key status of an expiring key lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestKeyStatusOfAnUnusedKey: with an operator that finds keys unused after 3 seconds, a key
// nobody calls with turns Unused, and key status shows the condition and its Warning Event.
func TestKeyStatusOfAnUnusedKey(t *testing.T) {
	s := startSystem(t, 3*time.Second)
	ns := s.Namespace(t, "unused")
	mustSucceed(t, run(t, s.Config, ns, "", "key", "create", "idle", "--timeout", "30s"))
	k := waitForKey(t, s.Client, ns, "idle", "Unused", func(k *switchboardv1alpha1.APIKey) bool {
		return meta.IsStatusConditionTrue(k.Status.Conditions, switchboardv1alpha1.ConditionUnused)
	})
	unused := meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionUnused)
	var r result
	testenv.Eventually(t, 30*time.Second, "the KeyUnused Event", func() error {
		r = run(t, s.Config, ns, "", "key", "status", "idle")
		if r.code != 0 || !strings.Contains(r.stdout, "KeyUnused") {
			return errNotYet
		}
		return nil
	})
	for _, want := range []string{"Unused", "True", switchboardv1alpha1.ReasonUnused, unused.Message, "Warning", "KeyUnused", "Last used:", "never"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("key status of an unused key lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestKeyStatusOfARevealedKey(t *testing.T) {
	ns := env.Namespace(t, "status-reveal")
	r := admin(t, ns, "key", "create", "ci", "--timeout", "30s")
	mustSucceed(t, r)
	printed := strings.TrimSpace(r.stdout)
	eventuallyStatus(t, printed, 200)
	testenv.Eventually(t, 30*time.Second, "lastUsedAt and the claim are in the status", func() error {
		k := getAPIKey(t, ns, "ci")
		if k.Status.LastUsedAt == nil || meta.FindStatusCondition(k.Status.Conditions, switchboardv1alpha1.ConditionRevealed).Reason != switchboardv1alpha1.ReasonRevealClaimed {
			return errNotYet
		}
		return nil
	})
	r = admin(t, ns, "key", "status", "ci")
	mustSucceed(t, r)
	for _, want := range []string{
		"none: the key is revealed once (no spec.secretName)", "claimed (the key was shown once and is not kept)",
		"no lifetime (a key lasts until expiresAt, a rotation or a revocation)", "Ends:", "does not end on its own",
		"Renewal:", "none scheduled", "Rate limit:", "none", "anywhere", "every audience", "KeyClaimed",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("key status lacks %q:\n%s", want, r.stdout)
		}
	}
	if line := lineWith(r.stdout, "Last used:"); !strings.HasSuffix(line, " ago)") || strings.Contains(r.stdout, printed) {
		t.Fatalf("last use not shown (%q), or the key is:\n%s", line, r.stdout)
	}

	// Revoked: the state, when, and the Event, and no reveal to wait for.
	mustSucceed(t, admin(t, ns, "key", "revoke", "ci", "--yes"))
	testenv.Eventually(t, 30*time.Second, "the revocation is in the status", func() error {
		if getAPIKey(t, ns, "ci").Status.RevokedAt == nil {
			return errNotYet
		}
		return nil
	})
	r = admin(t, ns, "key", "status", "ci")
	mustSucceed(t, r)
	for _, want := range []string{"State:", "Revoked", "Revoked:", "KeyRevoked", "none: the key is revoked"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("key status of a revoked key lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestKeyStatusWithLessRights: whoever may only read APIKeys still gets their status, and is told
// which parts they may not see; Events readable only through events.k8s.io/v1 (the API the
// operator records them with) are found there.
func TestKeyStatusWithLessRights(t *testing.T) {
	ns := env.Namespace(t, "status-rbac")
	mustSucceed(t, admin(t, ns, "key", "create", "worker", "--secret-name", "worker-key", "--timeout", "30s"))
	group := switchboardv1alpha1.GroupVersion.Group

	reader := serviceAccountConfig(t, ns, "reader", []rbacv1.PolicyRule{rule(group, []string{"apikeys"}, "get")})
	r := run(t, reader, ns, "", "key", "status", "worker")
	mustSucceed(t, r)
	for _, want := range []string{
		`unknown: forbidden: you (system:serviceaccount:` + ns + `:reader) may not get secrets in namespace "` + ns + `"`,
		`Events:  not shown: forbidden: you (system:serviceaccount:` + ns + `:reader) may not list events in namespace "` + ns + `"`,
		"Ready", "KeyIssued",
	} {
		if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("key status lacks %q:\n%s", want, r.stdout)
		}
	}

	// Kubernetes' built-in view role (to which switchboard's tenant roles aggregate) lets its
	// holder read the Events, through core/v1, but not the delivery Secret. Its rules are filled
	// in by kube-controller-manager's aggregation, which envtest does not run on its own.
	env.StartControllerManager(t, "clusterrole-aggregation")
	viewer := serviceAccountConfig(t, ns, "viewer", []rbacv1.PolicyRule{rule(group, []string{"apikeys"}, "get")})
	if err := env.Client.Create(testContext(t), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "viewer"}},
	}); err != nil {
		t.Fatal(err)
	}
	var viewed keyReport
	testenv.Eventually(t, 60*time.Second, "the view role applies", func() error {
		r = run(t, viewer, ns, "", "key", "status", "worker", "-o", "json")
		if r.code != 0 {
			return errors.New(r.stderr)
		}
		viewed = keyReport{}
		if err := json.Unmarshal([]byte(r.stdout), &viewed); err != nil {
			return err
		}
		if viewed.EventsError != "" {
			return errors.New(viewed.EventsError)
		}
		return nil
	})
	if len(viewed.Events) == 0 || viewed.Events[0].Reason != "KeyCreated" || viewed.Delivery.Secret != secretUnknown {
		t.Fatalf("with the view role: events %+v, delivery %+v", viewed.Events, viewed.Delivery)
	}

	newAPI := serviceAccountConfig(t, ns, "events-api", []rbacv1.PolicyRule{
		rule(group, []string{"apikeys"}, "get"), rule("events.k8s.io", []string{"events"}, "list"),
	})
	r = run(t, newAPI, ns, "", "key", "status", "worker", "-o", "json")
	mustSucceed(t, r)
	var got keyReport
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.EventsError != "" || len(got.Events) == 0 || got.Events[0].Reason != "KeyCreated" || got.Events[0].From != "switchboard-operator" {
		t.Fatalf("events through events.k8s.io/v1: %q %+v", got.EventsError, got.Events)
	}
	if got.Delivery.Secret != secretUnknown {
		t.Fatalf("delivery: %+v", got.Delivery)
	}
}
