package frontdoor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// A handler never waits on its client. net/http hands a handler a body that reads from the
// connection, for as long as the client takes, and discards up to 256 KiB of a body the handler
// left unread before its answer leaves: either way the connection sits in the "answer" phase,
// which never gives way, waiting on a client that may send a byte a minute. So the door deals
// with every body before any handler: a door whose handlers read none refuses it, and answers
// without reading it; any other reads it whole, up to its MaxBody, in the body phase (bounded by
// HTTPLimits.Body, and evictable like the headers' phase), and hands its handler a copy in
// memory. Memory is bounded by the door's connections × MaxBody, which each door keeps small.

// Refusal is an answer a door writes itself, before any handler.
type Refusal struct {
	Status int
	// Header holds the answer's header fields but for Content-Length and Connection.
	Header http.Header
	Body   []byte
}

// defaultRefusal answers a body refused on a door that names no refusal of its own.
var defaultRefusal = Refusal{
	Status: http.StatusRequestEntityTooLarge,
	Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}},
	Body:   []byte("request body not allowed, or larger than this listener reads\n"),
}

// connKey keys a request's *doorConn in its context (http.Server.ConnContext).
type connKey struct{}

// withConn is the http.Server's ConnContext: it remembers the door's connection for the body
// gate. Once per connection, not per request.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if dc, ok := unwrap(c).(*doorConn); ok {
		return context.WithValue(ctx, connKey{}, dc)
	}
	return ctx
}

// bodyGate is a door's handler: it passes a request without a body straight on (one comparison
// on the request path), refuses a body the door does not read, and reads any other first.
type bodyGate struct {
	next    http.Handler
	maxBody int64
	refusal []byte // the whole refusal, status line to body, as sent
	typed   Refusal
	before  func(*http.Request) *Refusal
}

func newBodyGate(next http.Handler, limits HTTPLimits) *bodyGate {
	r := defaultRefusal
	if limits.BodyRefusal != nil {
		r = *limits.BodyRefusal
	}
	return &bodyGate{next: next, maxBody: max(limits.MaxBody, 0), refusal: r.wire(), typed: r, before: limits.BeforeBody}
}

// wire is r as sent: status line, fields, Content-Length, Connection: close, body.
func (r Refusal) wire() []byte {
	answer := fmt.Appendf(nil, "HTTP/1.1 %d %s\r\n", r.Status, http.StatusText(r.Status))
	for name, values := range r.Header {
		for _, v := range values {
			answer = fmt.Appendf(answer, "%s: %s\r\n", name, v)
		}
	}
	answer = append(answer, "Content-Length: "+strconv.Itoa(len(r.Body))+"\r\nConnection: close\r\n\r\n"...)
	return append(answer, r.Body...)
}

func (g *bodyGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		g.next.ServeHTTP(w, r)
		return
	}
	if g.maxBody == 0 || r.ContentLength > g.maxBody {
		bodiesRefused.Inc()
		refuse(w, g.typed, g.refusal)
		return
	}
	if g.before != nil {
		if answer := g.before(r); answer != nil {
			refuse(w, *answer, answer.wire())
			return
		}
	}
	dc, _ := r.Context().Value(connKey{}).(*doorConn)
	if dc != nil {
		dc.enter(phaseBody)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, g.maxBody+1))
	switch {
	case err != nil:
		// Closed for its bound, given way to a newcomer, or malformed (chunking): nothing
		// reaches the handler, and the connection closes.
		bodiesUnread.Inc()
		w.Header().Set("Connection", "close")
		http.Error(w, "the request body could not be read", http.StatusBadRequest)
		return
	case int64(len(body)) > g.maxBody:
		bodiesRefused.Inc()
		refuse(w, g.typed, g.refusal)
		return
	}
	if dc != nil {
		dc.enter(phaseActive)
	}
	// A shallow copy: net/http keeps the request it read, whose body is at its end.
	r2 := r.WithContext(r.Context())
	r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	g.next.ServeHTTP(w, r2)
}

// refuse answers r (whose bytes as sent are wire) before any handler, and closes the connection
// without reading the body: the connection is hijacked from net/http, which would otherwise read
// up to 256 KiB of the body first, for as long as the client takes.
func refuse(w http.ResponseWriter, r Refusal, wire []byte) {
	hj, ok := w.(http.Hijacker)
	if !ok { // not HTTP/1: refuse in the answer, and ask for the connection to close
		for name, values := range r.Header {
			w.Header()[name] = values
		}
		w.Header().Set("Connection", "close")
		w.WriteHeader(r.Status)
		_, _ = w.Write(r.Body)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	_, _ = buf.Write(wire)
	_ = buf.Flush()
	// Answered, it lingers half-closed: the first to give way at the bound.
	if dc, ok := unwrap(c).(*doorConn); ok {
		dc.enter(phaseIdle)
	}
	closeAfterAnswer(c)
}

// closeAfterAnswer half-closes c, then closes it once the client has closed its side or after
// a short while: closed at once with the unread body in its receive buffer, the kernel would
// reset the connection, and the client could lose the answer (net/http waits the same way).
func closeAfterAnswer(c net.Conn) {
	_ = CloseWrite(c)
	time.AfterFunc(rstAvoidanceDelay, func() { _ = c.Close() })
}

// rstAvoidanceDelay is how long a refused connection stays half-closed (net/http's own value).
const rstAvoidanceDelay = 500 * time.Millisecond
