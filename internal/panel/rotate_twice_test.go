//go:build !unit

package panel_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/keyclient/keyclienttest"
	"github.com/switchboard-dev/switchboard/internal/keysecret"
	"github.com/switchboard-dev/switchboard/internal/panel"
)

// TestRotateFormPostedTwiceShowsOneKey: the rotate form posted twice at once (a double click,
// or the same form in two tabs), both posts reading the APIKey before either writes, requests
// one rotation. One response shows its key; the other says the rotation was requested by
// another submission and shows none. The key shown works, and so does the replaced key, in the
// grace period asked for: neither post took the other's key for stolen.
func TestRotateFormPostedTwiceShowsOneKey(t *testing.T) {
	requireOperator(t)
	ns := env.Namespace(t, "rotate-twice")
	h, err := panel.NewHandler(&configv1alpha1.PanelSettings{}, nil, panel.Deps{RESTConfig: env.Config})
	if err != nil {
		t.Fatal(err)
	}
	race := keyclienttest.NewWriteRace(2, 30*time.Second)
	panel.InterceptUserClients(h, race.Intercept)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	v := newVisitor(t, srv)
	v.signIn(grant(t, ns, "owner", ownerRules), ns)

	p := v.postCSRF("/keys/create", url.Values{"namespace": {ns}, "name": {"ci"}, "expires": {""}})
	first := revealedKey(p.body)
	if first == "" {
		t.Fatalf("create: %d %q", p.status, errorLine(p.body))
	}
	waitFor(t, func() bool { // the claim recorded before the race, not in the middle of it
		var k switchboardv1alpha1.APIKey
		return env.Client.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "ci"}, &k) == nil && keyclient.RevealStatus(&k) == keyclient.RevealGone
	})
	p = v.get("/keys/rotate?namespace=" + ns + "&name=ci")
	form := url.Values{"namespace": {ns}, "name": {"ci"}, "grace": {"1h"}, "requested_at": {regexpValue(t, p.body, "requested_at")}, "csrf_token": {v.csrf}}

	type response struct {
		status int
		body   string
		err    error
	}
	out := make([]response, 2)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPost, v.base+"/keys/rotate", bytes.NewBufferString(form.Encode()))
			if err != nil {
				out[i].err = err
				return
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := v.c.Do(req)
			if err != nil {
				out[i].err = err
				return
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			out[i] = response{status: resp.StatusCode, body: string(body), err: err}
		}()
	}
	wg.Wait()
	if !race.Raced() || race.Conflicts() == 0 {
		t.Fatalf("the race was not run: both posts came to the write %v, writes refused for the precondition %d", race.Raced(), race.Conflicts())
	}
	var shown string
	var other response
	for _, r := range out {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if key := revealedKey(r.body); key != "" && r.status == http.StatusOK {
			shown = key
		} else {
			other = r
		}
	}
	if shown == "" || other.body == "" {
		t.Fatalf("responses %d %q and %d %q: want one showing a key and one error", out[0].status, errorLine(out[0].body), out[1].status, errorLine(out[1].body))
	}
	if msg := errorLine(other.body); other.status != http.StatusConflict || revealedKey(other.body) != "" ||
		!strings.Contains(msg, "already requested by another submission") && !strings.Contains(msg, "already carried out") {
		t.Fatalf("the other post: %d %q, want a conflict saying the rotation was requested by another submission", other.status, msg)
	}
	requireHash(t, ns, "ci", shown)
	if _, secret := hashSecret(t, ns, "ci"); string(secret.Data[keysecret.DataPreviousHash]) != sha(first) {
		t.Fatal("the replaced key is not the previous key: its grace was ended")
	}
	requireV1(t, shown, http.StatusOK)
	requireV1(t, first, http.StatusOK) // within the grace period
}
