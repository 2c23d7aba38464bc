package secretscanning

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

const keyID = "bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c"

func newTestPartner(t *testing.T, f *fakeKeys, maxBody int64, maxBatch int) *Partner {
	t.Helper()
	ks, err := NewKeySet(KeySetOptions{URL: f.srv.URL, Client: f.srv.Client(), Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPartner(PartnerOptions{Keys: ks, Prefix: "sb", MaxBody: maxBody, MaxBatch: maxBatch})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func partnerRequest(body []byte, id, sig string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/github/secret-scanning", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if id != "" {
		r.Header.Set("Github-Public-Key-Identifier", id)
	}
	if sig != "" {
		r.Header.Set("Github-Public-Key-Signature", sig)
	}
	return r
}

func TestPartnerRead(t *testing.T) {
	ours, foreign, badChecksum := testTokens(t)
	f := newFakeKeys(t)
	key := f.add(t, keyID, elliptic.P256())
	p384 := f.add(t, "p384", elliptic.P384())

	body := fmt.Appendf(nil, `[{"token":%q,"type":"switchboard_api_key","url":"https://github.com/octo/app/blob/abc/config.env","source":"content"},`+
		`{"token":%q,"type":"switchboard_api_key","url":"","source":"commit"},`+
		`{"token":%q,"type":"switchboard_api_key","url":"https://gist.github.com/x","source":"gist_content"}]`, ours, foreign, badChecksum)
	sig := sign(t, key, body)
	rawSig, _ := base64.StdEncoding.DecodeString(sig)
	big := slices.Concat(body, bytes.Repeat([]byte(" "), 1024))
	batch := fmt.Appendf(nil, "[%s]", strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`{"token":%q,"type":"t"},`, foreign), 4), ","))
	notArray := []byte(`{"token":"x"}`)
	noToken := []byte(`[{"type":"t"}]`)

	tests := []struct {
		name     string
		body     []byte
		id, sig  string
		maxBody  int64
		maxBatch int
		want     error
		wantMsg  string
	}{
		{name: "valid", body: body, id: keyID, sig: sig},
		{name: "a bit flipped in the body", body: flip(body, 10), id: keyID, sig: sig, want: ErrUnauthenticated, wantMsg: "does not match the body"},
		{name: "a bit flipped in the signature", body: body, id: keyID, sig: base64.StdEncoding.EncodeToString(flip(rawSig, len(rawSig)-1)), want: ErrUnauthenticated, wantMsg: "does not match the body"},
		{name: "signed by another key", body: body, id: keyID, sig: sign(t, p384, body), want: ErrUnauthenticated, wantMsg: "does not match the body"},
		{name: "unknown identifier", body: body, id: "ffff", sig: sig, want: ErrUnauthenticated, wantMsg: `no key "ffff"`},
		{name: "key of another curve", body: body, id: "p384", sig: sign(t, p384, body), want: ErrUnauthenticated, wantMsg: "not P-256"},
		{name: "no identifier", body: body, sig: sig, want: ErrUnauthenticated, wantMsg: "no Github-Public-Key-Identifier"},
		{name: "no signature", body: body, id: keyID, want: ErrUnauthenticated, wantMsg: "no Github-Public-Key-Signature"},
		{name: "garbled signature", body: body, id: keyID, sig: "not base64!", want: ErrUnauthenticated, wantMsg: "not base64"},
		{name: "base64 but not ASN.1", body: body, id: keyID, sig: base64.StdEncoding.EncodeToString([]byte("garbage")), want: ErrUnauthenticated},
		{name: "identifier too long", body: body, id: strings.Repeat("a", 300), sig: sig, want: ErrUnauthenticated, wantMsg: "more than 256"},
		{name: "body over the limit", body: big, id: keyID, sig: sign(t, key, big), maxBody: int64(len(body)), want: ErrTooLarge, wantMsg: "more than"},
		{name: "batch over the limit", body: batch, id: keyID, sig: sign(t, key, batch), maxBatch: 3, want: ErrTooLarge, wantMsg: "4 matches in one request, more than 3"},
		{name: "batch at the limit", body: batch, id: keyID, sig: sign(t, key, batch), maxBatch: 4},
		{name: "signed, not an array", body: notArray, id: keyID, sig: sign(t, key, notArray), want: ErrMalformed},
		{name: "signed, a match without token", body: noToken, id: keyID, sig: sign(t, key, noToken), want: ErrMalformed, wantMsg: "match 0 has no token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPartner(t, f, tt.maxBody, tt.maxBatch)
			r := partnerRequest(tt.body, tt.id, tt.sig)
			if tt.name == "body over the limit" {
				r.ContentLength = -1 // unknown length: the reader, not the header, must find it
			}
			reports, err := p.Read(r)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Read() error = %v, want %v", err, tt.want)
			}
			if err != nil {
				if reports != nil {
					t.Errorf("Read() returned %d reports with its error", len(reports))
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("Read() error = %q, want it to say %q", err, tt.wantMsg)
				}
				for _, tok := range []string{ours, foreign, badChecksum} {
					if strings.Contains(err.Error(), tok) {
						t.Errorf("the error contains a token: %q", err)
					}
				}
				return
			}
			if tt.name == "batch at the limit" {
				if len(reports) != 4 {
					t.Fatalf("got %d reports, want 4", len(reports))
				}
				return
			}
			if len(reports) != 3 {
				t.Fatalf("got %d reports, want 3", len(reports))
			}
			want := []struct {
				token, source, url string
				fp                 error
			}{
				{ours, "content", "https://github.com/octo/app/blob/abc/config.env", nil},
				{foreign, "commit", "", apikey.ErrMalformed},
				{badChecksum, "gist_content", "https://gist.github.com/x", apikey.ErrChecksum},
			}
			for i, w := range want {
				got := reports[i]
				if got.Hash != apikey.Sum(w.token) || got.Source != w.source || got.URL != w.url || got.Type != "switchboard_api_key" || !errors.Is(got.FalsePositive, w.fp) || (w.fp == nil) != got.Candidate() {
					t.Errorf("report %d = %+v, want hash of its token, source %q, url %q, false positive %v", i, got, w.source, w.url, w.fp)
				}
			}
			if dump := fmt.Sprintf("%+v %#v", reports, reports); strings.Contains(dump, ours) || strings.Contains(dump, foreign) || strings.Contains(dump, badChecksum) {
				t.Errorf("a report holds its token's plaintext: %s", dump)
			}
		})
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestPartnerReadRefusesOversizedBodyUnread shows that a body announced larger than the bound
// is refused before a byte of it is read, and the keys are not fetched.
func TestPartnerReadRefusesOversizedBodyUnread(t *testing.T) {
	f := newFakeKeys(t)
	signer := f.add(t, keyID, elliptic.P256())
	p := newTestPartner(t, f, 100, 0)
	r := partnerRequest(nil, keyID, sign(t, signer, make([]byte, 101)))
	body := &countingReader{r: bytes.NewReader(make([]byte, 101))}
	r.Body, r.ContentLength = io.NopCloser(body), 101
	_, err := p.Read(r)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read() = %v, want ErrTooLarge", err)
	}
	if body.n != 0 {
		t.Errorf("Read() read %d bytes of a body announced too large", body.n)
	}
	if n := f.fetches.Load(); n != 0 {
		t.Errorf("the keys were fetched %d times for a request refused for its size", n)
	}
}

func TestKeySetRefreshesOncePerIntervalForABurstOfUnknownKeys(t *testing.T) {
	f := newFakeKeys(t)
	key := f.add(t, keyID, elliptic.P256())
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	ks, err := NewKeySet(KeySetOptions{URL: f.srv.URL, Client: f.srv.Client(), Clock: clk, RefreshInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[]`)
	ctx := context.Background()
	if err := ks.Verify(ctx, keyID, sign(t, key, body), body); err != nil {
		t.Fatal(err)
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("first verification fetched the keys %d times, want 1", n)
	}

	burst := func() {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				err := ks.Verify(ctx, fmt.Sprintf("unknown-%d", i), sign(t, key, body), body)
				if !errors.Is(err, ErrUnauthenticated) {
					t.Errorf("Verify(unknown key) = %v, want ErrUnauthenticated", err)
				}
			})
		}
		wg.Wait()
	}
	burst()
	if n := f.fetches.Load(); n != 1 {
		t.Errorf("a burst of unknown identifiers within the interval fetched the keys %d more times, want 0", n-1)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	burst()
	if n := f.fetches.Load(); n != 2 {
		t.Errorf("a burst of unknown identifiers after the interval fetched the keys %d more times, want 1", n-1)
	}

	// GitHub rotates: a request signed by a new key is verified after one refresh.
	clk.SetTime(clk.Now().Add(time.Minute))
	rotated := f.add(t, "new-key", elliptic.P256())
	if err := ks.Verify(ctx, "new-key", sign(t, rotated, body), body); err != nil {
		t.Errorf("Verify(new key) = %v, want it verified after a refresh", err)
	}
	if err := ks.Verify(ctx, keyID, sign(t, key, body), body); err != nil {
		t.Errorf("Verify(old key still published) = %v", err)
	}
	if n := f.fetches.Load(); n != 3 {
		t.Errorf("fetches = %d, want 3", n)
	}
}

func TestKeySetUnreachable(t *testing.T) {
	f := newFakeKeys(t)
	key := f.add(t, keyID, elliptic.P256())
	f.setStatus(http.StatusInternalServerError)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	ks, err := NewKeySet(KeySetOptions{URL: f.srv.URL, Client: f.srv.Client(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[]`)
	for range 3 {
		err := ks.Verify(context.Background(), keyID, sign(t, key, body), body)
		if !errors.Is(err, ErrUnavailable) || HTTPStatus(err) != http.StatusServiceUnavailable {
			t.Fatalf("Verify() with GitHub down = %v, want ErrUnavailable (503)", err)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Errorf("GitHub down was asked %d times within the interval, want 1", n)
	}
	f.setStatus(http.StatusOK)
	clk.SetTime(clk.Now().Add(DefaultRefreshInterval))
	// The request that causes the fetch has already hung up: the fetch, which counts against
	// the interval and serves every request waiting for it, is made all the same.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ks.Verify(gone, keyID, sign(t, key, body), body); err != nil {
		t.Errorf("Verify() once GitHub is back = %v", err)
	}
}

func TestNewKeySetAndPartnerRefuseBadInput(t *testing.T) {
	for _, u := range []string{"api.github.com/meta", "ftp://x/y", "https://", "::"} {
		if _, err := NewKeySet(KeySetOptions{URL: u}); err == nil || !strings.Contains(err.Error(), "absolute http(s) URL") {
			t.Errorf("NewKeySet(%q) = %v, want an error naming the URL", u, err)
		}
	}
	if _, err := NewKeySet(KeySetOptions{RefreshInterval: -1}); err == nil {
		t.Error("NewKeySet(negative interval) succeeded")
	}
	if _, err := NewPartner(PartnerOptions{}); err == nil || !strings.Contains(err.Error(), "no key set") {
		t.Errorf("NewPartner(no keys) = %v", err)
	}
	ks, err := NewKeySet(KeySetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPartner(PartnerOptions{Keys: ks, Prefix: "Bad_"}); err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("NewPartner(bad prefix) = %v", err)
	}
	if _, err := NewPartner(PartnerOptions{Keys: ks, MaxBatch: -1}); err == nil {
		t.Error("NewPartner(negative batch) succeeded")
	}
}

func TestClassify(t *testing.T) {
	ours, foreign, badChecksum := testTokens(t)
	tests := []struct {
		name  string
		token string
		fp    error
	}{
		{"a key of this installation", ours, nil},
		{"another installation's prefix", foreign, apikey.ErrMalformed},
		{"the same length, another prefix", "xy" + ours[2:], apikey.ErrWrongPrefix},
		{"a bad checksum", badChecksum, apikey.ErrChecksum},
		{"not a key at all", "ghp_0123456789", apikey.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := classify(tt.token, "sb", "type", "url", "source")
			if !errors.Is(r.FalsePositive, tt.fp) || r.Candidate() != (tt.fp == nil) {
				t.Errorf("classify() false positive = %v, want %v", r.FalsePositive, tt.fp)
			}
			if r.Hash != apikey.Sum(tt.token) {
				t.Error("classify() hash is not the token's SHA-256")
			}
			if wantHint := map[bool]string{true: apikey.Hint(tt.token), false: ""}[tt.fp == nil]; r.Hint != wantHint {
				t.Errorf("classify() hint = %q, want %q", r.Hint, wantHint)
			}
		})
	}
}

func TestFeedback(t *testing.T) {
	ours, foreign, badChecksum := testTokens(t)
	leaked, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	reports := []Report{
		classify(leaked, "sb", "switchboard_api_key", "", ""),
		classify(ours, "sb", "switchboard_api_key", "", ""),
		classify(foreign, "sb", "switchboard_api_key", "", ""),
		classify(badChecksum, "sb", "switchboard_api_key", "", ""),
	}
	var asked []apikey.Hash
	issued := func(h apikey.Hash) bool {
		asked = append(asked, h)
		return h == apikey.Sum(leaked)
	}
	got, err := json.Marshal(Feedback(reports, issued))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`[{"token_hash":%q,"token_type":"switchboard_api_key","label":"true_positive"},`+
		`{"token_hash":%q,"token_type":"switchboard_api_key","label":"false_positive"},`+
		`{"token_hash":%q,"token_type":"switchboard_api_key","label":"false_positive"},`+
		`{"token_hash":%q,"token_type":"switchboard_api_key","label":"false_positive"}]`,
		apikey.Sum(leaked), apikey.Sum(ours), apikey.Sum(foreign), apikey.Sum(badChecksum))
	if string(got) != want {
		t.Errorf("Feedback() =\n%s\nwant\n%s", got, want)
	}
	if len(asked) != 2 || asked[0] != apikey.Sum(leaked) || asked[1] != apikey.Sum(ours) {
		t.Errorf("Feedback() looked up %d hashes, want only the 2 candidates'", len(asked))
	}
	if got := Feedback(nil, issued); got == nil || len(got) != 0 {
		t.Errorf("Feedback(no reports) = %#v, want an empty array (GitHub's format), not null", got)
	}
}

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: x", ErrUnauthenticated), http.StatusUnauthorized},
		{fmt.Errorf("%w: x", ErrTooLarge), http.StatusRequestEntityTooLarge},
		{fmt.Errorf("%w: x", ErrMalformed), http.StatusBadRequest},
		{fmt.Errorf("%w: %w", ErrUnavailable, context.DeadlineExceeded), http.StatusServiceUnavailable},
		{fmt.Errorf("%w: not JSON", ErrBadGateway), http.StatusBadGateway},
		{errors.New("other"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got := HTTPStatus(tt.err); got != tt.want {
			t.Errorf("HTTPStatus(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func FuzzParsePartner(f *testing.F) {
	ours, err := apikey.Generate("sb")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(fmt.Sprintf(`[{"token":%q,"type":"t","url":"u","source":"content"}]`, ours)))
	f.Add([]byte(`[{"source":"commit","token":"some_token","type":"some_type","url":"https://example.com/base-repo-url/"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[{"token":1}]`))
	f.Add([]byte(`[{"token":"\u0000"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		reports, err := parsePartner(body, "sb", 10)
		if err != nil {
			if reports != nil || HTTPStatus(err) == http.StatusInternalServerError {
				t.Fatalf("parsePartner() = %d reports, %v", len(reports), err)
			}
			return
		}
		if len(reports) > 10 {
			t.Fatalf("parsePartner() returned %d reports past its bound", len(reports))
		}
		for _, r := range reports {
			if r.Candidate() && r.Hint == "" {
				t.Fatal("a candidate without hint")
			}
		}
	})
}
