//go:build !unit

package panel_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium. A missing browser fails the test: the browser tests
// are part of the suite, not optional.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: the panel's browser tests need it. Install it with `apt-get install -y chromium` (Debian), as .ci/run does.")
	return ""
}

// pageProblems collects what the browser reports as broken: uncaught exceptions and console
// or policy errors (a Content-Security-Policy violation shows up here).
type pageProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *pageProblems) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, s)
}

func (p *pageProblems) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.list, "\n")
}

// newBrowser starts a headless chromium with a fresh profile and returns its tab. Problems
// the page reports (exceptions, console errors, Content-Security-Policy violations) are
// collected from the start.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) (context.Context, *pageProblems) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], extra...)
	opts = append(opts,
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	problems := &pageProblems{}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// A missing favicon.ico is the browser's guess, not the panel's problem.
			if (m.IsException() || m.Type == chromedp.ConsoleError) && !strings.Contains(m.URL, "favicon.ico") {
				problems.add(m.String() + " " + m.URL)
			}
		}
	}()
	if _, err := chromedp.Run(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdplog.Enable, cdp.Empty{})
		return err
	})); err != nil {
		t.Fatalf("enabling the browser log: %v", err)
	}
	return ctx, problems
}

// do runs browser actions with a time limit and fails the test with what went wrong.
func do(ctx context.Context, t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// get runs one browser action that returns a value.
func get[T any](ctx context.Context, t *testing.T, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// textOf returns the visible text of the first element matching sel.
func textOf(ctx context.Context, t *testing.T, sel string) string {
	t.Helper()
	return get(ctx, t, "reading "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// signInBrowser opens the panel at base, pastes token on the sign-in page and waits for the
// API keys section. It returns the origin the browser signed in on: a panel reached on
// 127.0.0.1 sends the browser to a host of its own (sb-….localhost), where its session lives.
func signInBrowser(ctx context.Context, t *testing.T, base, token string) string {
	t.Helper()
	do(ctx, t, "signing in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#api-keys")),
	)
	return get(ctx, t, "reading the origin", chromedp.Evaluate[string]("window.location.origin"))
}

// grantClipboard lets the panel's origin use the clipboard, as a person's click would.
func grantClipboard(ctx context.Context, t *testing.T, origin string) {
	t.Helper()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		_, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted, Origin: origin,
		})
		if err != nil {
			t.Fatalf("granting %s: %v", name, err)
		}
	}
}
