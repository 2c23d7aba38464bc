package webhooksender

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/testenv"
	"github.com/switchboard-dev/switchboard/internal/webhookdelivery"
)

// A message in the outbox arrives signed (verified by the Standard Webhooks reference
// library) with its webhook-id, leaves the outbox, and the KeyWebhook says so.
func TestDelivers(t *testing.T) {
	ns := env.Namespace(t, "deliver")
	secret := testSecret(1)
	rcv := newReceiver(t, secret, nil)
	sys := system(t, allowing(loopback...), Deps{RootCAs: pool(rcv)}, ns)
	kw := subscribe(t, ns, "audit", rcv.URL+"/hooks?token=x", secret)
	id := enqueue(t, sys, kw, "msg_deliver1")

	testenv.Eventually(t, 30*time.Second, "the delivery", func() error {
		if len(rcv.deliveries()) == 0 {
			return errors.New("nothing received")
		}
		return nil
	})
	d := rcv.deliveries()[0]
	if d.verified != nil || d.id != id {
		t.Fatalf("delivery %q: the reference library says %v; want webhook-id %q, verified", d.id, d.verified, id)
	}
	if !strings.Contains(string(d.body), `"type":"apikey.revoked"`) {
		t.Errorf("body %s", d.body)
	}
	testenv.Eventually(t, 30*time.Second, "the outbox emptied and the status", func() error {
		ob := outbox(t, sys, ns)
		k := keyWebhook(t, kw)
		if len(ob.Spec.Messages) != 0 {
			return fmt.Errorf("%d messages left", len(ob.Spec.Messages))
		}
		if st := findState(&ob.Spec, string(kw.UID)); st == nil || st.LastDeliveryTime == nil {
			return fmt.Errorf("endpoint state %+v", st)
		}
		if !strings.HasPrefix(ready(k), "True/Active") || k.Status.LastDeliveryTime == nil || k.Status.Pending != 0 {
			return fmt.Errorf("status: Ready %s, lastDeliveryTime %v, pending %d", ready(k), k.Status.LastDeliveryTime, k.Status.Pending)
		}
		return nil
	})
	if n := len(rcv.deliveries()); n != 1 {
		t.Errorf("%d deliveries of one message", n)
	}
}

// A 410 Gone disables the endpoint: its messages are dropped and counted, nothing more is
// sent until its spec changes, and then it is sent to again.
func TestGoneDisablesUntilTheSpecChanges(t *testing.T) {
	ns := env.Namespace(t, "gone")
	secret := testSecret(2)
	gone := true
	rcv := newReceiver(t, secret, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if gone {
			w.WriteHeader(http.StatusGone)
		}
	})
	sys := system(t, allowing(loopback...), Deps{RootCAs: pool(rcv)}, ns)
	kw := subscribe(t, ns, "audit", rcv.URL+"/v1", secret)
	kw = keyWebhook(t, kw)
	enqueue(t, sys, kw, "msg_gone1")
	enqueue(t, sys, kw, "msg_gone2")

	testenv.Eventually(t, 30*time.Second, "the endpoint disabled", func() error {
		ob := outbox(t, sys, ns)
		st := findState(&ob.Spec, string(kw.UID))
		if len(ob.Spec.Messages) != 0 || st == nil || st.DisabledGeneration != kw.Generation || st.Dropped != 2 {
			return fmt.Errorf("messages %d, state %+v", len(ob.Spec.Messages), st)
		}
		k := keyWebhook(t, kw)
		if !strings.HasPrefix(ready(k), "False/Gone") || k.Status.Dropped != 2 {
			return fmt.Errorf("status: Ready %s, dropped %d", ready(k), k.Status.Dropped)
		}
		return nil
	})
	// Another event while disabled: dropped and counted, never sent.
	enqueue(t, sys, kw, "msg_gone3")
	testenv.Eventually(t, 30*time.Second, "the third message dropped", func() error {
		ob := outbox(t, sys, ns)
		if st := findState(&ob.Spec, string(kw.UID)); len(ob.Spec.Messages) != 0 || st.Dropped != 3 {
			return fmt.Errorf("messages %d, dropped %d", len(ob.Spec.Messages), st.Dropped)
		}
		return nil
	})
	if n := len(rcv.deliveries()); n != 1 {
		t.Fatalf("%d requests; want the one answered 410", n)
	}

	// The tenant points the subscription elsewhere: the spec changes, deliveries resume.
	gone = false
	// A patch of the spec alone, as kubectl would: the status controller writes the object's
	// status meanwhile, which an Update of the whole object would conflict with.
	k := keyWebhook(t, kw)
	before := k.DeepCopy()
	k.Spec.URL = rcv.URL + "/v2"
	if err := env.Client.Patch(context.Background(), k, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the endpoint enabled again", func() error {
		if st := findState(&outbox(t, sys, ns).Spec, string(kw.UID)); st.DisabledGeneration != 0 {
			return fmt.Errorf("still disabled at generation %d", st.DisabledGeneration)
		}
		return nil
	})
	enqueue(t, sys, kw, "msg_gone4")
	testenv.Eventually(t, 30*time.Second, "the delivery after the change", func() error {
		got := rcv.deliveries()
		if len(got) != 2 || got[1].id != "msg_gone4" || got[1].verified != nil {
			return fmt.Errorf("deliveries %d", len(got))
		}
		if r := ready(keyWebhook(t, kw)); !strings.HasPrefix(r, "True/Active") {
			return fmt.Errorf("Ready %s", r)
		}
		return nil
	})
}

// A 500 is retried on the schedule, with the same webhook-id, and after the last attempt the
// message is dropped and counted, the KeyWebhook Failing.
func TestRetriesOnTheSchedule(t *testing.T) {
	ns := env.Namespace(t, "retry")
	secret := testSecret(3)
	// The first endpoint fails twice, then takes it; the second always fails.
	flaky := newReceiver(t, secret, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	broken := newReceiver(t, secret, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	schedule := []time.Duration{0, time.Second, 2 * time.Second}
	sys := system(t, allowing(loopback...), Deps{RootCAs: pool(flaky, broken), Schedule: schedule}, ns)
	first := subscribe(t, ns, "flaky", flaky.URL, secret)
	second := subscribe(t, ns, "broken", broken.URL, secret)
	enqueue(t, sys, first, "msg_retry1")
	enqueue(t, sys, second, "msg_retry2")

	testenv.Eventually(t, 30*time.Second, "three attempts at each", func() error {
		if a, b := len(flaky.deliveries()), len(broken.deliveries()); a < 3 || b < 3 {
			return fmt.Errorf("%d and %d attempts", a, b)
		}
		return nil
	})
	for _, rcv := range []*receiver{flaky, broken} {
		got := rcv.deliveries()
		for i, d := range got {
			if d.verified != nil || d.id != got[0].id {
				t.Errorf("attempt %d: id %q (first %q), verification %v", i+1, d.id, got[0].id, d.verified)
			}
			// Never before its time: the schedule's delay less the jitter.
			if i > 0 {
				if gap, least := d.at.Sub(got[i-1].at), time.Duration(float64(schedule[i])*(1-webhookdelivery.Jitter)); gap < least {
					t.Errorf("attempt %d came %s after the one before, before the schedule's %s", i+1, gap, least)
				}
			}
		}
	}
	testenv.Eventually(t, 30*time.Second, "the outcomes recorded", func() error {
		ob := outbox(t, sys, ns)
		if len(ob.Spec.Messages) != 0 {
			return fmt.Errorf("%d messages left", len(ob.Spec.Messages))
		}
		a, b := findState(&ob.Spec, string(first.UID)), findState(&ob.Spec, string(second.UID))
		if a == nil || a.LastDeliveryTime == nil || a.Dropped != 0 || b == nil || b.Dropped != 1 || !strings.Contains(b.LastError, "500") {
			return fmt.Errorf("states %+v, %+v", a, b)
		}
		if r := ready(keyWebhook(t, second)); !strings.HasPrefix(r, "False/Failing") || !strings.Contains(r, "500 Internal Server Error") {
			return fmt.Errorf("the broken one's Ready: %s", r)
		}
		if r := ready(keyWebhook(t, first)); !strings.HasPrefix(r, "True/Active") {
			return fmt.Errorf("the flaky one's Ready: %s", r)
		}
		return nil
	})
	if n := len(broken.deliveries()); n != len(schedule) {
		t.Errorf("%d attempts at the broken endpoint; the schedule has %d", n, len(schedule))
	}
}

// Many endpoints that accept and never answer in one namespace do not delay another
// namespace's delivery: it arrives within a second.
func TestBlackHolesDoNotDelayOtherNamespaces(t *testing.T) {
	a, b := env.Namespace(t, "holes"), env.Namespace(t, "good")
	secret := testSecret(4)
	rcv := newReceiver(t, secret, nil)
	hole := listen(t, "127.0.0.1:0")
	// The attempt timeout outlasts the test: the black holes hold their slots throughout.
	w := allowing(loopback...)
	w.AttemptTimeout = &metav1.Duration{Duration: time.Minute}
	sys := system(t, w, Deps{RootCAs: pool(rcv)}, a, b)
	const holes = 50
	for i := range holes {
		kw := subscribe(t, a, fmt.Sprintf("hole-%d", i), fmt.Sprintf("https://127.0.0.1:%s/%d", hole.port(), i), secret)
		enqueue(t, sys, kw, fmt.Sprintf("msg_hole%d", i))
	}
	good := subscribe(t, b, "good", rcv.URL, secret)
	testenv.Eventually(t, 60*time.Second, "the black holes holding their namespace's slots", func() error {
		if n := hole.accepted(); n < 4 {
			return fmt.Errorf("%d connections held", n)
		}
		return nil
	})
	// Let the good endpoint's signing secrets be copied first: the second is the delivery's.
	testenv.Eventually(t, 30*time.Second, "the good endpoint ready", func() error {
		if r := ready(keyWebhook(t, good)); !strings.HasPrefix(r, "True/Active") {
			return fmt.Errorf("Ready %s", r)
		}
		return nil
	})
	sent := time.Now()
	enqueue(t, sys, good, "msg_good")
	testenv.Eventually(t, 30*time.Second, "the good delivery", func() error {
		if len(rcv.deliveries()) == 0 {
			return errors.New("nothing received")
		}
		return nil
	})
	took := rcv.deliveries()[0].at.Sub(sent)
	t.Logf("with %d black holes in %s (%d connections held), %s's message arrived %s after it was recorded",
		holes, a, hole.accepted(), b, took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("the other namespace's delivery took %s, more than a second", took)
	}
	if n := hole.accepted(); n > 4 {
		t.Errorf("%d connections to the black holes; at most 4 (perNamespaceConcurrency)", n)
	}
}

// Endpoints that reach the sender's host, a cloud metadata endpoint or the cluster's networks
// are refused through the real sender path, literally, through a NAT64 or 6to4 address, by name
// or by redirect: nothing is received, and the KeyWebhook's status says why.
func TestRefusesForbiddenTargets(t *testing.T) {
	ns := env.Namespace(t, "ssrf")
	secret := testSecret(5)
	// What a refused delivery would reach: listeners on loopback addresses that count every
	// connection.
	lo := listen(t, "127.0.0.1:0")
	lo2 := listen(t, "127.0.0.2:"+lo.port())
	lo6 := listen(t, "[::1]:"+lo.port())
	// A receiver on an allowed address that redirects: the target is never followed.
	redirector := newReceiverOn(t, "127.0.0.7:0", secret, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://127.0.0.2:"+lo.port()+"/", http.StatusFound)
	})
	// Only the redirector's address is allowed; 10.96.0.0/12 is the cluster's Service network.
	w := configv1alpha1.WebhooksConfiguration{AllowedNetworks: []string{"127.0.0.7/32"}, DeniedNetworks: []string{"10.96.0.0/12"}}
	sys := system(t, w, Deps{RootCAs: pool(redirector)}, ns)
	port := lo.port()

	for _, tc := range []struct {
		name, url, reason, why string
	}{
		{"ipv6-loopback", "https://[::1]:" + port + "/", "InvalidEndpoint", "::1 is loopback"},
		{"loopback", "https://127.0.0.2:" + port + "/", "InvalidEndpoint", "127.0.0.2 is loopback"},
		{"metadata", "https://169.254.169.254/latest/meta-data", "InvalidEndpoint", "169.254.169.254 is the cloud metadata endpoint"},
		{"ipv6-metadata", "https://[fd00:ec2::254]/latest/meta-data", "InvalidEndpoint", "fd00:ec2::254 is AWS's IPv6 instance metadata endpoint"},
		{"nat64-cluster-ip", "https://[64:ff9b::a60:a]/", "InvalidEndpoint", "(NAT64 of 10.96.0.10) is in the denied network 10.96.0.0/12"},
		{"6to4-loopback", "https://[2002:7f00:2::1]:" + port + "/", "InvalidEndpoint", "(6to4 of 127.0.0.2) is loopback"},
		{"mapped-loopback", "https://[::ffff:127.0.0.1]:" + port + "/", "InvalidEndpoint", "is loopback"},
		{"cluster-ip", "https://10.96.0.10/", "InvalidEndpoint", "in the denied network 10.96.0.0/12"},
		{"name-to-loopback", "https://localhost:" + port + "/", "Failing", "refused by the webhook network policy"},
		{"redirect", redirector.URL + "/to-loopback", "Failing", "302 Found"},
	} {
		kw := subscribe(t, ns, tc.name, tc.url, secret)
		enqueue(t, sys, kw, "msg_"+strings.ReplaceAll(tc.name, "-", "_"))
		testenv.Eventually(t, 30*time.Second, tc.name+" refused", func() error {
			r := ready(keyWebhook(t, kw))
			if !strings.HasPrefix(r, "False/"+tc.reason) || !strings.Contains(r, tc.why) {
				return fmt.Errorf("Ready %s; want False/%s saying %q", r, tc.reason, tc.why)
			}
			return nil
		})
	}
	for _, l := range []*blackHole{lo, lo2, lo6} {
		if l != nil && l.accepted() > 0 {
			t.Errorf("%s received %d connections", l.Addr(), l.accepted())
		}
	}
	if n := len(redirector.deliveries()); n == 0 {
		t.Error("the redirecting endpoint was never called: the redirect case proves nothing")
	}
	// Nothing was delivered: the refused messages wait (or wait to be retried) in the outbox.
	if ob := outbox(t, sys, ns); len(ob.Spec.Messages) != 10 {
		t.Errorf("%d messages in the outbox; the 10 refused ones should wait there", len(ob.Spec.Messages))
	}
}

// End to end with the real operator: an APIKey issued in a namespace with a KeyWebhook reaches
// the receiver as apikey.created (recorded by the operator, sent by the sender), verified, with
// the key's hint and never the key.
func TestOperatorsEventsReachTheReceiver(t *testing.T) {
	ns := env.Namespace(t, "e2e")
	secret := testSecret(6)
	rcv := newReceiver(t, secret, nil)
	system(t, allowing(loopback...), Deps{RootCAs: pool(rcv)}, ns)
	subscribe(t, ns, "audit", rcv.URL, secret)
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"}, Spec: switchboardv1alpha1.APIKeySpec{Description: "e2e"}}
	if err := env.Client.Create(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "apikey.created delivered", func() error {
		for _, d := range rcv.deliveries() {
			if d.verified == nil && strings.Contains(string(d.body), `"type":"apikey.created"`) && strings.Contains(string(d.body), `"name":"billing"`) {
				return nil
			}
		}
		return fmt.Errorf("%d deliveries, none apikey.created for billing", len(rcv.deliveries()))
	})
	// The key itself, from its reveal Secret, is in no delivery.
	var secrets corev1.SecretList
	if err := env.Client.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	keys := 0
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			// A key, not its hint ("sb_live_AbCd…wxyz"), which deliveries do carry.
			if strings.HasPrefix(string(v), "sb_live_") && !strings.Contains(string(v), "…") {
				keys++
				for _, d := range rcv.deliveries() {
					if strings.Contains(string(d.body), string(v)) {
						t.Fatalf("a delivery carries the key of Secret %s, entry %s", s.Name, k)
					}
				}
			}
		}
	}
	if keys == 0 {
		t.Fatal("no key in the namespace's Secrets: the check proves nothing")
	}
}

// TestALeakReachesTheReceiver: issue 32's closed loop seen from a tenant's endpoint. A verified
// report becomes a LeakReport in the system namespace (internal/server's leak tests do that
// part with GitHub's signed formats); from there the real operator refuses the key and records
// apikey.leaked, and the real sender delivers it, signed, saying where the key was found and
// carrying its hint, never the key.
func TestALeakReachesTheReceiver(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "leak")
	secret := testSecret(7)
	rcv := newReceiver(t, secret, nil)
	sys := system(t, allowing(loopback...), Deps{RootCAs: pool(rcv)}, ns)
	subscribe(t, ns, "security", rcv.URL, secret)
	key := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"}, Spec: switchboardv1alpha1.APIKeySpec{Description: "leaked"}}
	if err := env.Client.Create(ctx, key); err != nil {
		t.Fatal(err)
	}
	var plaintext, hint string
	testenv.Eventually(t, 60*time.Second, "the key revealed", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(key), key); err != nil {
			return err
		}
		if key.Status.RevealSecretName == "" {
			return errors.New("no reveal Secret yet")
		}
		var s corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: key.Status.RevealSecretName}, &s); err != nil {
			return err
		}
		if v := string(s.Data[keysecret.DataKey]); strings.HasPrefix(v, "sb_live_") {
			plaintext, hint = v, key.Status.KeyHint
			return nil
		}
		return errors.New("no key in the reveal Secret")
	})
	sum := sha256.Sum256([]byte(plaintext))
	keyHash := hex.EncodeToString(sum[:])
	const where = "https://github.com/example/app/blob/4f2a/config.yaml"
	report := &switchboardv1alpha1.LeakReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: switchboardv1alpha1.LeakReportName(keyHash)},
		Spec: switchboardv1alpha1.LeakReportSpec{KeyHash: keyHash, KeyHint: hint, Source: switchboardv1alpha1.LeakSourceGitHubPartner,
			URL: where, Location: "content", ReportedAt: metav1.Now()},
	}
	if err := env.Client.Create(ctx, report); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "apikey.leaked delivered", func() error {
		for _, d := range rcv.deliveries() {
			if d.verified == nil && strings.Contains(string(d.body), `"type":"apikey.leaked"`) {
				var e webhookdelivery.Event
				if err := json.Unmarshal(d.body, &e); err != nil {
					return fmt.Errorf("apikey.leaked delivery %s: %w", d.id, err)
				}
				if e.Data.Name != "billing" || e.Data.URL != where || e.Data.KeyHint != hint || e.Data.KeyGeneration != 1 {
					return fmt.Errorf("apikey.leaked says %+v; want billing, generation 1, %s, found at %s", e.Data, hint, where)
				}
				if strings.Contains(string(d.body), plaintext) {
					t.Fatal("the apikey.leaked delivery carries the key")
				}
				return nil
			}
		}
		return fmt.Errorf("%d deliveries, none apikey.leaked verified", len(rcv.deliveries()))
	})
}
