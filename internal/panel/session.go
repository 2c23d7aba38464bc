package panel

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cookie names. The session cookie carries only a random id: the token stays in memory.
const (
	sessionCookie = "switchboard_session"
	loginCookie   = "switchboard_login"
	csrfField     = "csrf_token"
)

// session is one signed-in person. The bearer token lives only inside client's transport.
type session struct {
	id   string
	csrf string
	user string
	// host is the Host the session was created on: its cookie counts there alone (see
	// currentSession).
	host      string
	saNS      string // the namespace of a ServiceAccount's token, the natural default
	client    client.Client
	createdAt time.Time
	lastSeen  time.Time
	flash     string // one notice shown by the next page, after a redirect
	namespace string // the namespace last viewed
	// oidc holds the provider's tokens of a session begun with single sign-on (nil for a
	// pasted token). It is set before the session's cookie is handed out.
	oidc *oidcSession
}

// sessionStore keeps sessions in memory: a restart signs everybody out, which is the safe
// failure for credentials. It holds at most max sessions, and at most perUser of one user.
type sessionStore struct {
	clock   clock.PassiveClock
	idle    time.Duration
	maxAge  time.Duration
	max     int
	perUser int
	mu      sync.Mutex
	entries map[string]*session
}

func newSessionStore(c clock.PassiveClock, idle, maxAge time.Duration, maxSessions, perUser int) *sessionStore {
	return &sessionStore{clock: c, idle: idle, maxAge: maxAge, max: maxSessions, perUser: perUser, entries: map[string]*session{}}
}

// errTooManySessions refuses a sign-in when the panel holds as many sessions as it may.
var errTooManySessions = errors.New("the panel holds as many sessions as it may")

// randomToken returns 256 random bits, URL-safe.
func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// create starts a session. It first drops expired sessions; then, when the user holds perUser
// sessions already, it ends the one they used least recently (evicted is its user: a person
// signing in again is never locked out by their own forgotten sessions, and one token cannot
// hold more than perUser); when the store is full with others' sessions it refuses with
// errTooManySessions (ending someone else's session would let a flood sign people out).
func (s *sessionStore) create(user, saNS, host string, c client.Client) (sess *session, evicted bool, err error) {
	id, err := randomToken()
	if err != nil {
		return nil, false, err
	}
	csrf, err := randomToken()
	if err != nil {
		return nil, false, err
	}
	now := s.clock.Now()
	sess = &session{id: id, csrf: csrf, user: user, host: strings.ToLower(host), saNS: saNS, client: c, createdAt: now, lastSeen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		mine   int
		oldest *session
	)
	for k, e := range s.entries {
		switch {
		case s.expired(e, now):
			delete(s.entries, k)
		case e.user == user:
			mine++
			if oldest == nil || e.lastSeen.Before(oldest.lastSeen) {
				oldest = e
			}
		}
	}
	if mine >= s.perUser {
		delete(s.entries, oldest.id)
		evicted = true
	}
	if len(s.entries) >= s.max {
		return nil, false, errTooManySessions
	}
	s.entries[id] = sess
	return sess, evicted, nil
}

func (s *sessionStore) expired(e *session, now time.Time) bool {
	return now.Sub(e.lastSeen) >= s.idle || now.Sub(e.createdAt) >= s.maxAge
}

// get returns the live session id created on host, and marks it used.
func (s *sessionStore) get(id, host string) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok || !strings.EqualFold(e.host, host) {
		return nil, false
	}
	now := s.clock.Now()
	if s.expired(e, now) {
		delete(s.entries, id)
		return nil, false
	}
	e.lastSeen = now
	return e, true
}

// delete ends a session.
func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, id)
}

// takeFlash returns and clears the session's one-time notice.
func (s *sessionStore) takeFlash(e *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := e.flash
	e.flash = ""
	return f
}

// setFlash leaves a notice for the next page.
func (s *sessionStore) setFlash(e *session, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.flash = msg
}

// rememberNamespace records the namespace last viewed, the default of the next page.
func (s *sessionStore) rememberNamespace(e *session, ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.namespace = ns
}

// lastNamespace is the namespace to show when the URL names none.
func (s *sessionStore) lastNamespace(e *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.namespace != "":
		return e.namespace
	case e.saNS != "":
		return e.saNS
	default:
		return "default"
	}
}

// secure reports that the browser reaches the panel over TLS: directly, or through a proxy
// that terminates TLS in front of it (the settings' secureCookies, --secure-cookies).
func (h *handler) secure(r *http.Request) bool { return r.TLS != nil || h.settings.SecureCookies }

// hostPrefix is the cookie name prefix that makes a browser accept the cookie only when it is
// Secure, has Path=/ and no Domain: no other host, nor a plain-HTTP page of this host, can set
// or shadow it (RFC 6265bis, "__Host-").
const hostPrefix = "__Host-"

// cookieName is a panel cookie's name: with the __Host- prefix whenever cookies are Secure.
func (h *handler) cookieName(r *http.Request, name string) string {
	if h.secure(r) {
		return hostPrefix + name
	}
	return name
}

// cookie builds a panel cookie: HttpOnly, SameSite=Strict, Path=/, no Domain; Secure and named
// with the __Host- prefix over TLS.
func (h *handler) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{ //nolint:gosec // Secure is set whenever the browser reaches the panel over TLS
		Name:     h.cookieName(r, name),
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   h.secure(r),
		SameSite: http.SameSiteStrictMode,
	}
}

// currentSession finds the request's session, if any. A session counts only on the Host it was
// created on: its cookie, replayed to the panel under another name (by a local app that received
// it, or through DNS rebinding), is no session.
func (h *handler) currentSession(r *http.Request) (*session, bool) {
	c, err := r.Cookie(h.cookieName(r, sessionCookie))
	if err != nil || c.Value == "" {
		return nil, false
	}
	return h.sessions.get(c.Value, r.Host)
}

// sessionHandler is a handler that needs a signed-in person.
type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session)

// withSession sends people without a session to the sign-in page, and refuses every POST
// whose CSRF token does not match the session's with 403.
func (h *handler) withSession(next sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.currentSession(r)
		if !ok {
			if r.Method != http.MethodGet {
				// A form posted after the session ended: nothing is done, the person signs in again.
				http.Redirect(w, r, "/login?expired=1", http.StatusSeeOther)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !validCSRF(r.PostFormValue(csrfField), s.csrf) {
			h.forbiddenCSRF(w)
			return
		}
		if s.oidc != nil && !h.refreshSession(r.Context(), s) {
			h.endSession(w, r, s)
			return
		}
		next(w, r, s)
	}
}

// validCSRF compares in constant time; an empty token never matches.
func validCSRF(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// forbiddenCSRF answers a POST without the form's CSRF token.
func (h *handler) forbiddenCSRF(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "403 Forbidden: the form's security token is missing or stale. Reload the page and try again.", http.StatusForbidden)
}
