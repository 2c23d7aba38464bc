//go:build !unit

package fault

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// hostileHeader returns the i-th of a family of malformed or random Authorization values.
func hostileHeader(rng *rand.Rand, valid string, i int) string {
	randomBytes := func(n int) string {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		return string(b)
	}
	randomRunes := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteRune(rune(rng.IntN(0x2FFFF)))
		}
		return sb.String()
	}
	mutate := func(s string) string {
		b := []byte(s)
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255)) // never a no-op
		return string(b)
	}
	switch i % 16 {
	case 0:
		return randomBytes(rng.IntN(100))
	case 1:
		return "Bearer " + randomBytes(rng.IntN(100))
	case 2:
		return "Bearer " + randomRunes(rng.IntN(60))
	case 3:
		return "Bearer " + mutate(valid)
	case 4:
		return "Bearer " + valid[:rng.IntN(len(valid))]
	case 5:
		return "Bearer " + valid + randomRunes(1+rng.IntN(5))
	case 6:
		return "Bearer " + valid + "="
	case 7:
		return "Bearer  " + valid
	case 8:
		return "Bearer " + valid + " " + valid
	case 9:
		return "Basic " + valid
	case 10:
		return "Bearer"
	case 11:
		return "Bearer " + strings.Repeat("A", 1000+rng.IntN(5000))
	case 12:
		return "Bearer\t" + valid
	case 13:
		return "Bearer " + valid + "\x00"
	case 14:
		return "Bearer " + strings.Replace(valid, "_live_", "_test_", 1)
	default:
		return "Bearer sb_live_" + randomRunes(49)
	}
}

// servingWithOneKey runs an operator and a server on a fresh namespace with one Connection and
// one issued key, waits until the key gets 200, and returns the server's URL and the key.
func servingWithOneKey(t *testing.T, nsPrefix string, serverArgs ...string) (string, string) {
	t.Helper()
	ensureSystemNamespace(t)
	ns := env.Namespace(t, nsPrefix)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")
	createConnections(t, ns, "alpha")
	valid := issue(t, ns, "valid")
	_, api, _ := startServer(t, kc, serverArgs...)
	testenv.Eventually(t, 30*time.Second, "the server serving", func() error {
		r, err := call(api+"/v1/connections", "Bearer "+valid)
		if err == nil && r.status != 200 {
			err = fmt.Errorf("status %d", r.status)
		}
		return err
	})
	return api, valid
}

// TestHostileAuthorizationHeaders: 10,000 random and malformed Authorization values get only 401
// with one of the two codes, or 429/431 — never a 5xx, never a dropped connection (a panic).
func TestHostileAuthorizationHeaders(t *testing.T) {
	scanAfter(t)
	api, valid := servingWithOneKey(t, "hostile", "--auth-failure-burst=100000", "--auth-failure-rate=100000")

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const total = 10000
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w))) // #nosec G404 -- test input, not a secret.
			for i := w; i < total; i += 8 {
				h := hostileHeader(rng, valid, i)
				outcome, err := sendRaw(api, h)
				mu.Lock()
				if err != nil {
					counts["transport error: "+err.Error()]++
				} else {
					counts[outcome]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	allowed := map[string]bool{"401 API_KEY_MISSING": true, "401 API_KEY_INVALID": true, "429 RATE_LIMITED": true, "431": true, "400": true}
	for outcome, n := range counts {
		t.Logf("%6d × %s", n, outcome)
		if !allowed[outcome] {
			t.Errorf("%d requests got %s", n, outcome)
		}
	}
	if counts["401 API_KEY_MISSING"] == 0 || counts["401 API_KEY_INVALID"] == 0 {
		t.Error("the hostile set must exercise both codes")
	}
	if r, err := call(api+"/v1/connections", "Bearer "+valid); err != nil || r.status != 200 {
		t.Fatalf("after the hostile requests the valid key got %d, %v", r.status, err)
	}
}

// sendRaw writes a request with the header bytes exactly as given (net/http would refuse to
// send some of them) and returns "STATUS CODE" of the answer.
func sendRaw(api, authorization string) (string, error) {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(api, "http://"), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// Header values cannot hold CR or LF: a raw newline would start another header.
	authorization = strings.NewReplacer("\r", " ", "\n", " ").Replace(authorization)
	if _, err := fmt.Fprintf(conn, "GET /v1/connections HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nConnection: close\r\n\r\n", authorization); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", fmt.Errorf("no HTTP answer: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	code := ""
	if i := strings.Index(string(body), `"code":"`); i >= 0 {
		rest := string(body[i+8:])
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			code = " " + rest[:j]
		}
	}
	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
		// net/http itself refuses malformed header bytes and oversized headers, before the handler.
		return fmt.Sprint(resp.StatusCode), nil
	}
	return fmt.Sprint(resp.StatusCode) + code, nil
}

// TestSlowClientsDoNotHurtOthers: clients that send their headers a byte at a time, from eight
// addresses (each within its share of the listener's connections), are cut off at the API
// listener's 5 s bound for headers, while a normal client keeps getting answers.
func TestSlowClientsDoNotHurtOthers(t *testing.T) {
	scanAfter(t)
	api, valid := servingWithOneKey(t, "slow")

	const slow = 100
	cutOff := make(chan time.Duration, slow)
	for i := range slow {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(attackers[i%len(attackers)])}}
		go func() {
			conn, err := d.Dial("tcp", strings.TrimPrefix(api, "http://"))
			if err != nil {
				cutOff <- -1
				return
			}
			defer func() { _ = conn.Close() }()
			start := time.Now()
			line := "GET /v1/connections HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("s", 200)
			for i := 0; i < len(line); i++ {
				if _, err := conn.Write([]byte{line[i]}); err != nil {
					cutOff <- time.Since(start)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			cutOff <- -1 // never cut off: 20 s of trickling went through
		}()
	}
	var worst time.Duration
	for range 50 {
		start := time.Now()
		r, err := call(api+"/v1/connections", "Bearer "+valid)
		if err != nil || r.status != 200 {
			t.Fatalf("a normal client got %d, %v while slow clients were connected", r.status, err)
		}
		worst = max(worst, time.Since(start))
		time.Sleep(50 * time.Millisecond)
	}
	for range slow {
		d := <-cutOff
		if d < 0 {
			t.Fatal("a slow client was never cut off")
		}
		// The listener closes a connection 5 s into its headers (checked every 500 ms); a
		// write fails once the peer has closed.
		if d > 15*time.Second {
			t.Fatalf("a slow client was cut off only after %s", d)
		}
		if d < 5*time.Second {
			t.Fatalf("a slow client was cut off after %s, before the headers' bound of 5 s", d)
		}
	}
	t.Logf("%d slow clients cut off; the normal client's slowest answer took %s", slow, worst)
}
