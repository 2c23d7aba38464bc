package frontdoor

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	certutil "k8s.io/client-go/util/cert"
)

// TestHTTPSDoor: an HTTPS door answers HTTP/1.1 even when its TLS configuration offers h2, as
// controller-runtime's do (it would have negotiated HTTP/2 and then answered in HTTP/1.1), and
// its ErrorLog takes net/http's line of a failed handshake.
func TestHTTPSDoor(t *testing.T) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{{127, 0, 0, 1}}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	logged := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: 1})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limits := DefaultHTTPLimits
	limits.ErrorLog = logged.V(1)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	listener := Listener{Door: "api", Given: l, Limits: &limits, TLS: cfg,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Group{Listeners: []Listener{listener}, ShutdownTimeout: time.Second, Log: logr.Discard()}.Run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serving: %v", err)
		}
	})

	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}}} //nolint:gosec // a self-signed test certificate
	resp, err := c.Get("https://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatalf("a client that offers h2: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.Proto != "HTTP/1.1" || string(body) != "HTTP/1.1" {
		t.Errorf("answered in %s to a request in %s, want HTTP/1.1", resp.Proto, body)
	}

	// A caller that does not trust the certificate fails the handshake.
	if conn, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{ServerName: "localhost", MinVersion: tls.VersionTLS12}); err == nil {
		_ = conn.Close()
		t.Fatal("the handshake passed with an untrusted certificate")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(lines, "\n")
		mu.Unlock()
		if strings.Contains(got, "TLS handshake error") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed handshake was not logged to ErrorLog; it has %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
