package panel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// mapper knows the few kinds the panel touches. A static mapper spares every session a
// discovery round-trip, and the panel from needing discovery rights.
var mapper = newMapper()

func newMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	add := func(gvk schema.GroupVersionKind, plural, singular string, scope meta.RESTScope) {
		gv := gvk.GroupVersion()
		m.AddSpecific(gvk, gv.WithResource(plural), gv.WithResource(singular), scope)
	}
	// Spelled out: guessing the plural of "APIKey" gives "apikeies".
	add(switchboardv1alpha1.GroupVersion.WithKind("APIKey"), "apikeys", "apikey", meta.RESTScopeNamespace)
	add(switchboardv1alpha1.GroupVersion.WithKind("Connection"), "connections", "connection", meta.RESTScopeNamespace)
	add(corev1.SchemeGroupVersion.WithKind("Secret"), "secrets", "secret", meta.RESTScopeNamespace)
	add(corev1.SchemeGroupVersion.WithKind("Namespace"), "namespaces", "namespace", meta.RESTScopeRoot)
	add(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"), "selfsubjectaccessreviews", "selfsubjectaccessreview", meta.RESTScopeRoot)
	return m
}

// userClient reaches the API server as the token's owner: the panel's own credentials are
// stripped (AnonymousClientConfig keeps only the address and the CA), the token added.
func (h *handler) userClient(token string) (client.Client, error) {
	cfg := rest.AnonymousClientConfig(h.base)
	cfg.BearerToken = token
	cfg.UserAgent = "switchboard-panel"
	// A person's clicks are few; waiting for the operator polls a few times a second.
	cfg.QPS, cfg.Burst = 20, 40
	cfg.Timeout = 30 * time.Second
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme, Mapper: mapper})
	if err != nil || h.interceptUser == nil {
		return c, err
	}
	return h.interceptUser(c), nil
}

// loginPage is the data of the sign-in page.
type loginPage struct {
	layout
	Error     string
	LoginCSRF string
	// SSO labels the single sign-on button; empty without an identity provider.
	SSO string
	// TrustConfig is the AuthenticationConfiguration the API server lacks, shown when it
	// rejected a signed-in person's ID token (token mode).
	TrustConfig string
	// Notice is a neutral message (signed out).
	Notice string
}

// loginForm shows the sign-in page. Its CSRF token is a cookie echoed by a hidden field, so
// that no other site can sign a visitor in under someone else's identity.
func (h *handler) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.currentSession(r); ok {
		http.Redirect(w, r, "/keys", http.StatusSeeOther)
		return
	}
	page := loginPage{layout: layout{Title: "Sign in"}}
	if r.URL.Query().Get("expired") != "" {
		page.Error = "Your session ended. Sign in again; nothing was changed."
	}
	if r.URL.Query().Get("signed_out") != "" {
		page.Notice = "You are signed out."
	}
	h.renderLogin(w, r, http.StatusOK, page)
}

func (h *handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, page loginPage) {
	token, err := randomToken()
	if err != nil {
		http.Error(w, "no randomness available", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, h.cookie(r, loginCookie, token, 3600))
	page.LoginCSRF = token
	if h.oidc != nil {
		page.SSO = h.oidc.providerName
	}
	h.render(w, status, "login", page)
}

// login checks the pasted token with TokenReview and starts a session. Each attempt costs a
// TokenReview, so attempts are limited per client address, and TokenReviews in flight at all.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if !h.allowAttempt(w, r) {
		return
	}
	c, err := r.Cookie(h.cookieName(r, loginCookie))
	if err != nil || !validCSRF(r.PostFormValue(csrfField), c.Value) {
		h.forbiddenCSRF(w)
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	token = strings.TrimSpace(strings.TrimPrefix(token, "Bearer "))
	if token == "" {
		h.renderLogin(w, r, http.StatusBadRequest, loginPage{Error: "Paste a Kubernetes bearer token to sign in."})
		return
	}
	if strings.ContainsAny(token, " \t\r\n") {
		h.renderLogin(w, r, http.StatusBadRequest, loginPage{Error: "A bearer token is one line without spaces; paste only the token."})
		return
	}
	if !h.logins.startReview() {
		h.refuseLogin(w, r, http.StatusServiceUnavailable, time.Second, "The panel is busy checking other sign-ins. Try again in a moment.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	review, err := h.reviewer.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	h.logins.endReview()
	if err != nil {
		h.deps.Logger.Error(err, "TokenReview failed")
		msg := "The panel could not verify the token: the API server is unreachable or refused the TokenReview."
		if apierrors.IsForbidden(err) {
			msg = `The panel may not verify tokens: its service account needs "create" on tokenreviews.authentication.k8s.io (ClusterRole system:auth-delegator).`
		}
		h.renderLogin(w, r, http.StatusBadGateway, loginPage{Error: msg})
		return
	}
	if !review.Status.Authenticated {
		h.deps.Logger.Info("sign-in refused: token not authenticated")
		h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Error: "The API server did not accept this token. It may be mistyped, expired or revoked."})
		return
	}
	uc, err := h.userClient(token)
	if err != nil {
		h.renderLogin(w, r, http.StatusInternalServerError, loginPage{Error: fmt.Sprintf("Cannot build a client for this token: %v", err)})
		return
	}
	user := review.Status.User.Username
	if _, ok := h.openSession(w, r, user, serviceAccountNamespace(user), uc); !ok {
		return
	}
	h.deps.Logger.Info("signed in", "user", user)
	http.SetCookie(w, h.cookie(r, loginCookie, "", -1))
	http.Redirect(w, r, "/keys", http.StatusSeeOther)
}

// allowAttempt holds both sign-in paths to the attempts a client address may make, answering
// the browser itself (and saying false) when this one is past them.
func (h *handler) allowAttempt(w http.ResponseWriter, r *http.Request) bool {
	bucket := clientBucket(r, h.proxies)
	ok, wait := h.logins.allow(bucket, h.deps.Clock.Now())
	if ok {
		return true
	}
	wait = max(wait.Round(time.Second), time.Second)
	h.deps.Logger.Info("sign-in refused: too many attempts from this address", "address", bucket)
	h.refuseLogin(w, r, http.StatusTooManyRequests, wait, fmt.Sprintf("Too many sign-in attempts from your address. Wait %s and try again.", wait))
	return false
}

// refuseLogin answers a sign-in the panel cannot take now with the login page saying why, and
// when to come back (Retry-After, whole seconds).
func (h *handler) refuseLogin(w http.ResponseWriter, r *http.Request, status int, retryAfter time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	h.renderLogin(w, r, status, loginPage{Error: msg})
}

// openSession ends both sign-in paths: it opens the signed-in user's session within the panel's
// bounds and sets its cookie, or answers the browser itself (and says false) when it cannot.
func (h *handler) openSession(w http.ResponseWriter, r *http.Request, user, saNamespace string, uc client.Client) (*session, bool) {
	sess, evicted, err := h.sessions.create(user, saNamespace, r.Host, uc)
	if errors.Is(err, errTooManySessions) {
		h.deps.Logger.Info("sign-in refused: the panel holds as many sessions as it may", "user", user, "maxSessions", *h.settings.MaxSessions)
		h.refuseLogin(w, r, http.StatusServiceUnavailable, time.Minute, "The panel has as many people signed in as it can hold. Try again later.")
		return nil, false
	}
	if err != nil {
		http.Error(w, "no randomness available", http.StatusInternalServerError)
		return nil, false
	}
	if evicted {
		h.deps.Logger.Info("ended the least recently used session of a user at the per-user limit", "user", user, "maxSessionsPerUser", *h.settings.MaxSessionsPerUser)
	}
	http.SetCookie(w, h.cookie(r, sessionCookie, sess.id, 0))
	return sess, true
}

// serviceAccountNamespace returns the namespace of a "system:serviceaccount:NS:NAME" user.
func serviceAccountNamespace(user string) string {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return ""
	}
	ns, _, ok := strings.Cut(rest, ":")
	if !ok {
		return ""
	}
	return ns
}

// logout ends the session and forgets its token. A single sign-on session also ends at the
// provider: its refresh token is revoked and the browser sent to its end-session page.
func (h *handler) logout(w http.ResponseWriter, r *http.Request, s *session) {
	h.sessions.delete(s.id)
	h.deps.Logger.Info("signed out", "user", s.user)
	http.SetCookie(w, h.cookie(r, sessionCookie, "", -1))
	if s.oidc != nil {
		if end := h.endProviderSession(r.Context(), s.oidc); end != "" {
			http.Redirect(w, r, end, http.StatusSeeOther)
			return
		}
	}
	http.Redirect(w, r, "/login?signed_out=1", http.StatusSeeOther)
}

// endSession handles a token the API server no longer accepts (expired, or its
// ServiceAccount deleted): the session is over.
func (h *handler) endSession(w http.ResponseWriter, r *http.Request, s *session) {
	h.sessions.delete(s.id)
	http.SetCookie(w, h.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/login?expired=1", http.StatusSeeOther)
}
