package secretscanning

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// fakeKeys plays GitHub's meta/public_keys/secret_scanning endpoint with test key pairs.
type fakeKeys struct {
	srv     *httptest.Server
	fetches atomic.Int32

	mu     sync.Mutex
	status int
	keys   map[string]*ecdsa.PrivateKey
}

func newFakeKeys(t *testing.T) *fakeKeys {
	t.Helper()
	f := &fakeKeys{status: http.StatusOK, keys: map[string]*ecdsa.PrivateKey{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// add publishes a new key of curve c under id and returns it.
func (f *fakeKeys) add(t *testing.T, id string, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[id] = k
	return k
}

func (f *fakeKeys) setStatus(s int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = s
}

func (f *fakeKeys) serve(w http.ResponseWriter, _ *http.Request) {
	f.fetches.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status != http.StatusOK {
		w.WriteHeader(f.status)
		return
	}
	type key struct {
		KeyIdentifier string `json:"key_identifier"`
		Key           string `json:"key"`
		IsCurrent     bool   `json:"is_current"`
	}
	var doc struct {
		PublicKeys []key `json:"public_keys"`
	}
	for id, k := range f.keys {
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			panic(err)
		}
		doc.PublicKeys = append(doc.PublicKeys, key{KeyIdentifier: id, Key: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), IsCurrent: true})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// sign is the Github-Public-Key-Signature of body by k.
func sign(t *testing.T, k *ecdsa.PrivateKey, body []byte) string {
	t.Helper()
	digest := sha256.Sum256(body)
	sig, err := ecdsa.SignASN1(rand.Reader, k, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// flip is s with one bit of its byte i changed.
func flip(s []byte, i int) []byte {
	out := append([]byte(nil), s...)
	out[i] ^= 1
	return out
}

// keys of this test run: one of this installation's prefix, one of another, one with a bad
// checksum.
func testTokens(t *testing.T) (ours, foreign, badChecksum string) {
	t.Helper()
	ours, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err = apikey.Generate("acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := apikey.Generate("sb")
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(other)
	i := len(b) - apikey.ChecksumLength - 1 // a random character: the checksum no longer matches
	if b[i] == 'a' {
		b[i] = 'b'
	} else {
		b[i] = 'a'
	}
	return ours, foreign, string(b)
}
