//go:build !unit

package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
)

// unreadList sends GET path with key on a connection whose receive buffer is as small as the
// kernel allows, and never reads the answer: a slow reader. The connection closes when the test
// ends. A response the test read a moment before may still be counted in flight (the client can
// hold all of its bytes before the handler has returned): a 429 then is tried again.
func unreadList(t *testing.T, s *testServer, path, key string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		_ = rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	var c net.Conn
	eventually(t, "a list request admitted for the slow reader", func() bool {
		var err error
		if c, err = d.Dial("tcp", strings.TrimPrefix(s.URL, "http://")); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, key); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReaderSize(c, 16).ReadString('\n')
		switch {
		case err == nil && strings.Contains(line, " 200 "):
			return true
		case err == nil && strings.Contains(line, " 429 "):
			_ = c.Close()
			return false
		}
		t.Fatalf("the slow reader's status line: %q, %v", line, err)
		return false
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSlowReadersOfOneNamespaceAreBounded: a reader that does not read holds its response,
// counted against its namespace's bytes in flight. Past the bound, the namespace's other list
// requests get 429 TOO_MANY_CONCURRENT_REQUESTS (whatever key they carry), while another
// namespace, a HEAD and a 304 are answered; once the reader goes, the namespace is served again.
func TestSlowReadersOfOneNamespaceAreBounded(t *testing.T) {
	doc := loadDocument(t)
	ns, other := env.Namespace(t, "slow"), env.Namespace(t, "calm")
	for i := range 10 {
		c := &switchboardv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fat-%d", i)},
			Spec: switchboardv1alpha1.ConnectionSpec{Metadata: map[string]switchboardv1alpha1.MetadataValue{}}}
		for k := range 50 {
			c.Spec.Metadata[fmt.Sprintf("k%02d", k)] = switchboardv1alpha1.MetadataValue(strings.Repeat("<", 500))
		}
		if err := env.Client.Create(ctx(t), c); err != nil {
			t.Fatal(err)
		}
		c.Status.ID = fmt.Sprintf("conn_fat%d", i)
		if err := env.Client.Status().Update(ctx(t), c); err != nil {
			t.Fatal(err)
		}
	}
	newConnection(t, other, "calm", "conn_calm", nil)
	slow := newKey(t, ns, "slow", switchboardv1alpha1.APIKeySpec{})
	sibling := newKey(t, ns, "sibling", switchboardv1alpha1.APIKeySpec{})
	calm := newKey(t, other, "calm", switchboardv1alpha1.APIKeySpec{})

	// A bound of one byte: one response at a time (one is always admitted), whatever its size.
	s := startServer(t, nil, &sc{MaxInFlightBytesPerNamespace: ptr.To[int64](1)}, Deps{}, true)
	var full response
	eventually(t, "the namespace listed whole", func() bool {
		full = s.get(t, "/v1/connections", sibling.Key)
		return full.Status == http.StatusOK && strings.Count(string(full.Body), `"id":"conn_fat`) == 10
	})
	// Counted once the slow reader holds its list: until then, unreadList's own tries may be
	// refused (the list above can still be counted in flight when the test has read it whole).
	reader := unreadList(t, s, "/v1/connections", slow.Key)
	refusedBefore := metricValue(t, "switchboard_api_concurrency_refused_total", "", "")

	for _, path := range []string{"/v1/connections", "/v1/connections?limit=2"} {
		resp := s.get(t, path, sibling.Key)
		if resp.Status != http.StatusTooManyRequests || resp.errorCode(t) != apicode.TooManyConcurrent || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s with another key of the namespace while a reader holds a list: %d %s (Retry-After %q), want 429 %s",
				path, resp.Status, resp.Body, resp.Header.Get("Retry-After"), apicode.TooManyConcurrent)
		}
		if err := doc.checkResponse("/v1/connections", "GET", resp); err != nil {
			t.Error(err)
		}
	}
	if got := metricValue(t, "switchboard_api_concurrency_refused_total", "", "") - refusedBefore; got != 2 {
		t.Errorf("switchboard_api_concurrency_refused_total grew by %v, want 2", got)
	}
	if resp := s.get(t, "/v1/connections", calm.Key); resp.Status != http.StatusOK {
		t.Errorf("another namespace while a reader holds a list: %d %s", resp.Status, resp.Body)
	}
	if resp := s.request(t, http.MethodHead, "/v1/connections", func(h http.Header) { h.Set("Authorization", "Bearer "+sibling.Key) }); resp.Status != http.StatusOK {
		t.Errorf("HEAD, which sends no list: %d", resp.Status)
	}
	notModified := s.request(t, http.MethodGet, "/v1/connections", func(h http.Header) {
		h.Set("Authorization", "Bearer "+sibling.Key)
		h.Set("If-None-Match", full.Header.Get("ETag"))
	})
	if notModified.Status != http.StatusNotModified {
		t.Errorf("a revalidation, which sends no list: %d", notModified.Status)
	}

	_ = reader.Close()
	eventually(t, "the namespace served again once the reader is gone", func() bool {
		return s.get(t, "/v1/connections", sibling.Key).Status == http.StatusOK
	})
}
