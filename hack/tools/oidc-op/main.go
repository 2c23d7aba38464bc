// Command oidc-op is the OpenID Provider switchboard's tests sign in with: the certified
// provider implementation of github.com/zitadel/oidc (its op package, with the example's
// in-memory storage and login page), served over TLS, with users and groups from a file and one
// confidential client. It is built into bin/ by `make oidc-op`, like the other tools, so that the
// panel is tested against a real provider (discovery, a login page, PKCE, refresh tokens,
// end-session) rather than a stub that hands out tokens without a login.
//
// Not for production: users' passwords sit in a file in plain text.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// user is one entry of the -users file.
type user struct {
	// ID is the subject (the "sub" claim); Username and Password sign in on the login page.
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "oidc-op:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		issuer, listen, certFile, keyFile, usersFile, clientID, secretFile string
		redirects, postLogout                                              listFlag
		idTokenLifetime                                                    time.Duration
	)
	flag.StringVar(&issuer, "issuer", "", "issuer URL (https://host:port, no trailing slash): the iss claim and the discovery base")
	flag.StringVar(&listen, "listen", "", "address to listen on (default: the issuer's host:port)")
	flag.StringVar(&certFile, "tls-cert", "", "TLS certificate (PEM) for the issuer's host")
	flag.StringVar(&keyFile, "tls-key", "", "TLS private key (PEM)")
	flag.StringVar(&usersFile, "users", "", `JSON file: [{"id","username","password","email","groups":[…]}]`)
	flag.StringVar(&clientID, "client-id", "", "the one confidential client's id")
	flag.StringVar(&secretFile, "client-secret-file", "", "file holding the client's secret")
	flag.Var(&redirects, "redirect-uri", "allowed redirect URI; a glob as in path.Match (repeatable)")
	flag.Var(&postLogout, "post-logout-redirect-uri", "allowed post-logout redirect URI; a glob (repeatable)")
	flag.DurationVar(&idTokenLifetime, "id-token-lifetime", time.Hour, "lifetime of ID tokens")
	flag.Parse()

	u, err := url.Parse(issuer)
	switch {
	case issuer == "" || err != nil || u.Scheme != "https" || u.Host == "" || strings.HasSuffix(issuer, "/"):
		return fmt.Errorf("-issuer must be an https URL without a trailing slash, got %q", issuer)
	case certFile == "" || keyFile == "":
		return errors.New("-tls-cert and -tls-key are required: the Kubernetes API server trusts https issuers only")
	case usersFile == "" || clientID == "" || secretFile == "":
		return errors.New("-users, -client-id and -client-secret-file are required")
	case len(redirects) == 0:
		return errors.New("at least one -redirect-uri is required")
	}
	if listen == "" {
		listen = u.Host
	}
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		return fmt.Errorf("reading the client secret: %w", err)
	}
	users, groups, err := loadUsers(usersFile)
	if err != nil {
		return err
	}
	clients := map[string]*storage.Client{clientID: storage.WebClient(clientID, strings.TrimSpace(string(secret)))}
	store := &groupStorage{
		Storage: storage.NewStorageWithClients(users, clients),
		groups:  groups,
		client:  clientPolicy{redirects: redirects, postLogout: postLogout, idTokenLifetime: idTokenLifetime},
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(issuer, store, logger, false)

	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: router, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(os.Stderr, "oidc-op: serving %s on %s\n", issuer, l.Addr())
	if err := srv.ServeTLS(l, certFile, keyFile); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func loadUsers(path string) (userStore, map[string][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading -users: %w", err)
	}
	var list []user
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, nil, fmt.Errorf("parsing -users %s: %w", path, err)
	}
	users, groups := userStore{}, map[string][]string{}
	for _, u := range list {
		if u.ID == "" || u.Username == "" || u.Password == "" {
			return nil, nil, fmt.Errorf("-users %s: every user needs an id, a username and a password", path)
		}
		users[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, Email: u.Email,
			EmailVerified: u.Email != "", FirstName: u.Username, PreferredLanguage: language.English}
		groups[u.ID] = u.Groups
	}
	return users, groups, nil
}

// userStore is the example storage's user store, filled from the -users file.
type userStore map[string]*storage.User

func (s userStore) GetUserByID(id string) *storage.User { return s[id] }
func (s userStore) GetUserByUsername(name string) *storage.User {
	for _, u := range s {
		if u.Username == name {
			return u
		}
	}
	return nil
}
func (s userStore) ExampleClientID() string { return storage.ServiceUserID }

// groupStorage adds a "groups" claim to ID tokens (the example storage has none), and hands out
// the client wrapped in clientPolicy.
type groupStorage struct {
	*storage.Storage
	groups map[string][]string
	client clientPolicy
}

// SetUserinfoFromRequest fills the ID token's claims: the example's, plus groups.
func (s *groupStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	if g := s.groups[req.GetSubject()]; len(g) > 0 {
		info.AppendClaims("groups", g)
	}
	return nil
}

// GetClientByClientID returns the client with this command's redirect URIs and lifetimes.
func (s *groupStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	p := s.client
	p.Client = c
	return &p, nil
}

// clientPolicy overrides what the example's web client hard-codes.
type clientPolicy struct {
	op.Client
	redirects, postLogout []string
	idTokenLifetime       time.Duration
}

func (c *clientPolicy) RedirectURIs() []string               { return nil }
func (c *clientPolicy) RedirectURIGlobs() []string           { return c.redirects }
func (c *clientPolicy) PostLogoutRedirectURIs() []string     { return nil }
func (c *clientPolicy) PostLogoutRedirectURIGlobs() []string { return c.postLogout }
func (c *clientPolicy) IDTokenLifetime() time.Duration       { return c.idTokenLifetime }

// IsScopeAllowed lets the client ask for "groups" (the example allows only its custom scope).
func (c *clientPolicy) IsScopeAllowed(scope string) bool {
	return scope == "groups" || c.Client.IsScopeAllowed(scope)
}

// IDTokenUserinfoClaimsAssertion puts email and preferred_username in the ID token, where the
// Kubernetes API server reads claims.
func (c *clientPolicy) IDTokenUserinfoClaimsAssertion() bool { return true }
