package panel

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// oidcLogin starts a sign-in: it remembers a state, a nonce and a PKCE verifier under a random
// id (the Lax flow cookie), and sends the browser to the provider. A browser on another host
// than the redirect URL's is first sent there, so that the flow cookie and the session it ends
// in live on the host the provider returns to.
func (h *handler) oidcLogin(w http.ResponseWriter, r *http.Request) {
	a := h.oidc
	if !strings.EqualFold(r.Host, a.redirect.Host) {
		target := url.URL{Scheme: a.redirect.Scheme, Host: a.redirect.Host, Path: oidcLoginPath}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, target.String(), http.StatusSeeOther)
		return
	}
	if !h.allowAttempt(w, r) {
		return
	}
	disc, err := a.discover(r.Context())
	if err != nil {
		h.deps.Logger.Error(err, "OIDC discovery failed")
		h.renderLogin(w, r, http.StatusBadGateway, loginPage{Error: "The identity provider " + a.cfg.IssuerURL +
			" did not answer (or its discovery document is invalid). Try again later, or sign in with a token."})
		return
	}
	id, f, err := a.start(h.deps.Clock.Now())
	if errors.Is(err, errTooManyFlows) {
		h.refuseLogin(w, r, http.StatusServiceUnavailable, time.Minute, "Too many sign-ins are in progress. Try again in a minute.")
		return
	}
	if err != nil {
		http.Error(w, "no randomness available", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, h.flowCookie(r, id, int(flowTTL/time.Second)))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, disc.oauth.AuthCodeURL(f.state, oauth2.S256ChallengeOption(f.verifier),
		oauth2.SetAuthURLParam("nonce", f.nonce)), http.StatusSeeOther)
}

// oidcCallback completes a sign-in: the flow cookie must name a pending sign-in whose state the
// provider returned; the code is exchanged with the PKCE verifier and the client secret; the ID
// token must be signed by the issuer, for this client, unexpired, and carry the flow's nonce.
// Then the mode decides who the person is to the API server (checkToken, checkImpersonation).
func (h *handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	a := h.oidc
	now := h.deps.Clock.Now()
	http.SetCookie(w, h.flowCookie(r, "", -1))
	q := r.URL.Query()
	c, err := r.Cookie(h.cookieName(r, flowCookie))
	if err != nil {
		h.renderLogin(w, r, http.StatusBadRequest, loginPage{Error: "This sign-in was not started in this browser, or it took longer than 10 minutes. Sign in again."})
		return
	}
	f, ok := a.take(c.Value, now)
	if !ok || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.state)) != 1 {
		h.deps.Logger.Info("OIDC sign-in refused: unknown, expired or mismatched state")
		h.renderLogin(w, r, http.StatusBadRequest, loginPage{Error: "This sign-in is unknown or expired (its state does not match). Sign in again."})
		return
	}
	if e := q.Get("error"); e != "" {
		// The provider's error code and description are shown as text, never as markup.
		msg := "The identity provider refused the sign-in: " + e
		if d := q.Get("error_description"); d != "" {
			msg += " (" + d + ")"
		}
		h.deps.Logger.Info("OIDC sign-in refused by the provider", "error", e)
		h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Error: msg})
		return
	}
	code := q.Get("code")
	if code == "" {
		h.renderLogin(w, r, http.StatusBadRequest, loginPage{Error: "The identity provider sent no authorization code. Sign in again."})
		return
	}
	disc, err := a.discover(r.Context())
	if err != nil {
		h.deps.Logger.Error(err, "OIDC discovery failed")
		h.renderLogin(w, r, http.StatusBadGateway, loginPage{Error: "The identity provider did not answer. Try again later."})
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx(r.Context()), 20*time.Second)
	defer cancel()
	tok, err := disc.oauth.Exchange(ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		h.deps.Logger.Error(redactOAuthError(err), "OIDC code exchange failed")
		h.renderLogin(w, r, http.StatusBadGateway, loginPage{Error: "The identity provider did not accept the sign-in (code exchange failed). " +
			"Check the panel's client id and secret, then sign in again."})
		return
	}
	raw, claims, err := h.verifyIDToken(ctx, disc, tok)
	if err != nil {
		h.deps.Logger.Info("OIDC sign-in refused: invalid ID token", "reason", err.Error())
		h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Error: "The identity provider's ID token is not valid: " + err.Error()})
		return
	}
	if n, _ := claims["nonce"].(string); subtle.ConstantTimeCompare([]byte(n), []byte(f.nonce)) != 1 {
		h.deps.Logger.Info("OIDC sign-in refused: nonce mismatch")
		h.renderLogin(w, r, http.StatusUnauthorized, loginPage{Error: "The ID token was not issued for this sign-in (nonce mismatch). Sign in again."})
		return
	}
	id, err := mapClaims(claims, a.cfg)
	if err != nil {
		if errors.Is(err, errEmailNotVerified) {
			// No address, no token: the reason alone tells the operator why sign-ins fail.
			h.deps.Logger.Info("OIDC sign-in refused: the ID token's email address, which names the user, is not verified")
		}
		h.renderLogin(w, r, http.StatusForbidden, loginPage{Error: "The panel cannot map your identity to a Kubernetes user: " + err.Error()})
		return
	}
	creds := &sessionCreds{mode: a.cfg.Mode}
	creds.set(raw, id)
	user := id.Username
	if a.cfg.Mode == configv1alpha1.OIDCModeToken {
		user, err = h.checkToken(ctx, raw)
		if err != nil {
			var untrusted *untrustedIssuerError
			if errors.As(err, &untrusted) {
				h.deps.Logger.Info("OIDC sign-in refused: the API server does not trust the issuer", "issuer", a.cfg.IssuerURL)
				h.renderLogin(w, r, http.StatusUnauthorized, loginPage{
					Error:       "You signed in with the identity provider, but the Kubernetes API server does not accept its ID tokens, so the panel cannot act as you. Its administrator must add this to the API server's --authentication-config file (then it reloads it by itself):",
					TrustConfig: AuthenticationConfigYAML(a.cfg, ""),
				})
				return
			}
			h.deps.Logger.Error(err, "checking the ID token with the API server")
			h.renderLogin(w, r, http.StatusBadGateway, loginPage{Error: "The panel could not check your sign-in with the Kubernetes API server: " + err.Error()})
			return
		}
	} else if err := h.checkImpersonation(ctx, id); err != nil {
		h.deps.Logger.Error(err, "impersonating the signed-in user", "user", id.Username)
		h.renderLogin(w, r, http.StatusBadGateway, loginPage{Error: err.Error()})
		return
	}
	uc, err := h.oidcClient(creds)
	if err != nil {
		h.renderLogin(w, r, http.StatusInternalServerError, loginPage{Error: "Cannot build a client for your session: " + err.Error()})
		return
	}
	sess, ok := h.openSession(w, r, user, "", uc)
	if !ok {
		return
	}
	sess.oidc = &oidcSession{token: tok, idToken: raw, expiry: idTokenExpiry(claims), issued: now, subject: id.Subject, creds: creds}
	h.deps.Logger.Info("signed in", "user", user, "via", "oidc", "mode", a.cfg.Mode)
	// A page of the panel's own moves on to the keys: a redirect would continue the provider's
	// cross-site navigation, on which the browser withholds the SameSite=Strict session cookie.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = continuePage.Execute(w, "/keys")
}

// flowCookie is the sign-in-in-progress cookie: like the others (HttpOnly, Path=/, no Domain,
// Secure and __Host- over TLS) but SameSite=Lax, so that the provider's redirect back carries it.
func (h *handler) flowCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{ //nolint:gosec // Secure is set whenever the browser reaches the panel over TLS
		Name:     h.cookieName(r, flowCookie),
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   h.secure(r),
		SameSite: http.SameSiteLaxMode,
	}
}

// continuePage hands over from the provider's navigation to one of the panel's own.
var continuePage = template.Must(template.New("continue").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={{.}}">
<title>Signed in · switchboard</title><link rel="stylesheet" href="/static/panel.css"></head>
<body><main><p id="continue">Signed in. <a href="{{.}}">Continue to your API keys</a>.</p></main></body></html>
`))

// verifyIDToken checks the ID token of a token response and returns it with its claims.
func (h *handler) verifyIDToken(ctx context.Context, disc *discovered, tok *oauth2.Token) (string, map[string]any, error) {
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return "", nil, errors.New("the token response holds no ID token (is the openid scope allowed?)")
	}
	idt, err := disc.verifier.Verify(ctx, raw)
	if err != nil {
		return "", nil, redactOAuthError(err)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", nil, fmt.Errorf("reading its claims: %w", err)
	}
	return raw, claims, nil
}

func idTokenExpiry(claims map[string]any) time.Time {
	if exp, ok := claims["exp"].(float64); ok {
		return time.Unix(int64(exp), 0)
	}
	return time.Time{}
}

// redactOAuthError keeps an oauth2 error's status and code, never the response body (a
// misbehaving provider could echo a token there).
func redactOAuthError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" {
			code = "no error code"
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("the provider answered %d (%s)", status, code)
	}
	return err
}

// untrustedIssuerError says the API server rejected the ID token: it does not trust the issuer
// (or maps it to another audience or claims).
type untrustedIssuerError struct{}

func (*untrustedIssuerError) Error() string { return "the API server does not accept the ID token" }

// checkToken asks the API server who the ID token's holder is (a SelfSubjectReview, which every
// authenticated user may create): the name the API server knows, or untrustedIssuerError.
func (h *handler) checkToken(ctx context.Context, idToken string) (string, error) {
	cfg := rest.AnonymousClientConfig(h.base)
	cfg.BearerToken = idToken
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if apierrors.IsUnauthorized(err) {
		return "", &untrustedIssuerError{}
	}
	if err != nil {
		return "", fmt.Errorf("SelfSubjectReview: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// checkImpersonation makes one request as the mapped user before the session starts: a
// SelfSubjectAccessReview (which the panel uses anyway), so that an API server refusing the
// impersonation is reported at sign-in, with the reason, not as 403s on every page.
func (h *handler) checkImpersonation(ctx context.Context, id identity) error {
	cfg := rest.CopyConfig(h.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: id.Username, Groups: id.Groups}
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "switchboard.dev", Resource: "apikeys", Verb: "list", Namespace: "default"},
	}}, metav1.CreateOptions{})
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("the Kubernetes API server refused to let the panel act as %s: %w. The panel's ServiceAccount needs the chart's impersonation ClusterRole (impersonate:user-info on users and groups)", id.Username, err)
	}
	if err != nil {
		return fmt.Errorf("the panel could not reach the Kubernetes API server as %s: %w", id.Username, err)
	}
	return nil
}

// refreshSession renews the session's ID token once half of its lifetime has passed, with the
// refresh token, and checks the new one as at sign-in (same subject). It reports false when
// the session cannot go on: no refresh token and the ID token expired, or the provider refused
// (the person was disabled or signed out there).
func (h *handler) refreshSession(ctx context.Context, s *session) bool {
	o := s.oidc
	if o == nil {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := h.deps.Clock.Now()
	if o.expiry.IsZero() || now.Before(o.issued.Add(o.expiry.Sub(o.issued)/2)) {
		return true
	}
	if o.token.RefreshToken == "" {
		return now.Before(o.expiry)
	}
	disc, err := h.oidc.discover(ctx)
	if err != nil {
		h.deps.Logger.Error(err, "OIDC discovery failed during a refresh")
		return now.Before(o.expiry)
	}
	ctx, cancel := context.WithTimeout(h.oidc.ctx(ctx), 20*time.Second)
	defer cancel()
	stale := *o.token
	stale.Expiry = time.Unix(1, 0) // force the refresh grant
	tok, err := disc.oauth.TokenSource(ctx, &stale).Token()
	if err != nil {
		h.deps.Logger.Info("OIDC refresh refused; ending the session", "user", s.user, "reason", redactOAuthError(err).Error())
		return false
	}
	raw, claims, err := h.verifyIDToken(ctx, disc, tok)
	if err != nil {
		h.deps.Logger.Info("OIDC refresh gave an invalid ID token; ending the session", "user", s.user, "reason", err.Error())
		return false
	}
	id, err := mapClaims(claims, h.oidc.cfg)
	if err != nil || id.Subject != o.subject {
		h.deps.Logger.Info("OIDC refresh gave another identity; ending the session", "user", s.user)
		return false
	}
	if h.oidc.cfg.Mode == configv1alpha1.OIDCModeImpersonate && id.Username != s.user {
		return false
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = o.token.RefreshToken
	}
	o.token, o.idToken, o.expiry, o.issued = tok, raw, idTokenExpiry(claims), now
	o.creds.set(raw, id)
	h.deps.Logger.Info("refreshed the session's ID token", "user", s.user)
	return true
}

// endProviderSession finishes a sign-out at the provider: it revokes the refresh token (a
// back-channel POST with the client's credentials) and returns where to send the browser, the
// provider's end_session_endpoint when it has one. The URL carries the client id and where to
// come back, never a token (id_token_hint is left out on purpose: URLs end up in logs and
// browser history).
func (h *handler) endProviderSession(ctx context.Context, o *oidcSession) string {
	disc, err := h.oidc.discover(ctx)
	if err != nil {
		return ""
	}
	o.mu.Lock()
	refresh := o.token.RefreshToken
	o.mu.Unlock()
	if disc.revocation != "" && refresh != "" {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := h.revoke(ctx, disc.revocation, refresh); err != nil {
			h.deps.Logger.Info("revoking the refresh token at the provider failed", "reason", err.Error())
		}
	}
	if disc.endSession == "" {
		return ""
	}
	u, err := url.Parse(disc.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("client_id", h.oidc.cfg.ClientID)
	back := url.URL{Scheme: h.oidc.redirect.Scheme, Host: h.oidc.redirect.Host, Path: "/login", RawQuery: "signed_out=1"}
	q.Set("post_logout_redirect_uri", back.String())
	u.RawQuery = q.Encode()
	return u.String()
}

// revoke calls the provider's revocation endpoint (RFC 7009) for a refresh token.
func (h *handler) revoke(ctx context.Context, endpoint, refresh string) error {
	form := url.Values{"token": {refresh}, "token_type_hint": {"refresh_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(h.oidc.cfg.ClientID), url.QueryEscape(h.oidc.clientSecret))
	resp, err := h.oidc.http.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the revocation endpoint answered %d", resp.StatusCode)
	}
	return nil
}
