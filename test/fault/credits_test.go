//go:build !unit

package fault

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/testenv"
)

// The exactness check of issue 41, scaled to CI: the issue's 10⁶ requests against 100,000
// credits are for a quiet machine; on CI's two busy cores, three servers, Redis, the control
// plane and 64 clients share them, so each case makes 100,000 attempts, which takes about as
// long as a case of this suite may. The numbers change nothing in what is proved: every credit
// is decided in one Redis script, whatever the scale. The credits are monthly: a run across
// midnight UTC starting a month would see them refill. On a quiet machine, the issue's own
// scale is `go test ./test/fault -run TestCreditsExactAcrossReplicas -credits.scale 10` (10⁶
// attempts against 200,000 credits).
const (
	creditsClients  = 64
	creditsReplicas = 3
	// creditsRedisTimeout replaces the 50 ms default: a Redis slowed by a busy CI would make
	// some answers 503 NOT_READY (credits fail closed) and spend credits no one was sold, which
	// is the cost of a timeout, not a miscount. The case with Redis killed counts those.
	creditsRedisTimeout = "5s"
)

// creditsScale multiplies TestCreditsExactAcrossReplicas's attempts and credits (1 in CI).
var creditsScale = flag.Int("credits.scale", 1, "multiply TestCreditsExactAcrossReplicas's 100,000 attempts and 20,000 credits")

// TestCreditsExactAcrossReplicas: three bin/switchboard servers share one redis-server, and 64
// clients spread over them spend a key with 20,000 credits a month (and no rate) in 100,000
// attempts: exactly 20,000 are admitted, every other answer is 429 API_KEY_CREDITS_EXHAUSTED.
func TestCreditsExactAcrossReplicas(t *testing.T) {
	amount, creditsAttempts := 20_000**creditsScale, 100_000**creditsScale
	rig := startCreditsRig(t, "credits-exact", int64(amount))
	got := rig.spend(t, creditsAttempts, nil)
	t.Logf("%d attempts in %s: %v", creditsAttempts, got.took.Round(time.Millisecond), got.answers)
	want := map[string]int{"200": amount, "429 " + apicode.KeyCreditsExhausted: creditsAttempts - amount}
	if fmt.Sprint(got.answers) != fmt.Sprint(want) {
		t.Errorf("answers %v, want %v", got.answers, want)
	}
	if spent := rig.spentInRedis(t); spent != amount {
		t.Errorf("Redis counts %d credits spent, want %d", spent, amount)
	}
}

// TestCreditsExactWithRedisKilled: the same, with 50,000 credits, and redis-server SIGKILLed
// after a third of the attempts and started again on its port and data. Redis appends every
// write to its file and syncs it before answering (appendonly yes, appendfsync always): without
// it, a restarted Redis would have forgotten the count and sold the credits again, which no
// server can know. With it, "exact" is: never more than the credits admitted, Redis's count
// never past them; while Redis is gone the key is refused 503 NOT_READY (credits fail closed,
// never counted again in each replica's memory); admissions resume once it is back; and a
// credit is lost only with an answer lost, a request in flight at the kill whose script ran
// but whose answer did not come back (the server answered 503), so at most one per client.
func TestCreditsExactWithRedisKilled(t *testing.T) {
	const amount, creditsAttempts = 50_000, 100_000
	rig := startCreditsRig(t, "credits-killed", amount, "--appendonly", "yes", "--appendfsync", "always", "--dir", t.TempDir())
	// The kill and the restart are the test's own goroutine's (they may fail it); the clients
	// keep sending meanwhile.
	third := make(chan *atomic.Int64)
	var once sync.Once
	result := make(chan spent, 1)
	go func() {
		result <- rig.spend(t, creditsAttempts, func(attempt int, admitted *atomic.Int64) {
			if attempt >= creditsAttempts/3 {
				once.Do(func() { third <- admitted })
			}
		})
	}()
	admittedSoFar := <-third
	killed := time.Now()
	rig.killRedis(t)
	admittedBefore := admittedSoFar.Load()
	rig.redis.Start()
	admittedAfter := admittedSoFar.Load()
	t.Logf("Redis away for %s", time.Since(killed).Round(time.Millisecond))
	got := <-result
	t.Logf("%d attempts in %s: %v; %d admitted before the kill, %d once Redis was back",
		creditsAttempts, got.took.Round(time.Millisecond), got.answers, admittedBefore, int64(got.answers["200"])-admittedAfter)
	admitted := got.answers["200"]
	if admitted > amount || admitted < amount-creditsClients {
		t.Errorf("%d admitted, want at most %d and at least %d (one credit lost per request in flight at the kill)", admitted, amount, amount-creditsClients)
	}
	for answer, n := range got.answers {
		if answer != "200" && answer != "429 "+apicode.KeyCreditsExhausted && answer != "503 "+apicode.NotReady {
			t.Errorf("%d answers %s: want only 200, 429 %s and 503 %s", n, answer, apicode.KeyCreditsExhausted, apicode.NotReady)
		}
	}
	if got.answers["503 "+apicode.NotReady] == 0 {
		t.Error("no 503 NOT_READY while Redis was gone")
	}
	if after := int64(admitted) - admittedAfter; after <= 0 {
		t.Errorf("%d admitted once Redis was back, want admissions to resume", after)
	}
	if spent := rig.spentInRedis(t); spent != amount {
		t.Errorf("Redis counts %d credits spent, want %d: each once, none past the amount", spent, amount)
	}
}

// TestCreditPoolNeverOverdrawn: two keys name one APIKeyCreditPool of 10,000 credits a month, and
// 64 clients spread over three servers on one Redis spend them in 50,000 attempts, every key on
// every server: exactly 10,000 are admitted between the two keys, every other answer is 429
// API_KEY_CREDITS_EXHAUSTED, and Redis holds one count, the pool's. A key of another namespace
// naming a pool of the same name gets nothing from it: every server refuses it, saying its pool
// does not exist.
func TestCreditPoolNeverOverdrawn(t *testing.T) {
	const amount, attempts = 10_000, 50_000
	rig := newCreditsRig(t)
	ns := env.Namespace(t, "credit-pool")
	pool := &switchboardv1alpha1.APIKeyCreditPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Spec: switchboardv1alpha1.APIKeyCreditPoolSpec{Credits: switchboardv1alpha1.APIKeyCredits{Amount: amount, Refill: switchboardv1alpha1.CreditsMonthly}}}
	if err := env.Client.Create(ctxFor(t, 10*time.Second), pool); err != nil {
		t.Fatal(err)
	}
	spec := switchboardv1alpha1.APIKeySpec{CreditPool: "team"}
	rig.keys = []string{issueWith(t, ns, "one", spec), issueWith(t, ns, "two", spec)}
	stranger := issueWith(t, env.Namespace(t, "credit-pool-other"), "stranger", spec)
	rig.startServers(t)
	got := rig.spend(t, attempts, nil)
	t.Logf("%d attempts by 2 keys of a pool in %s: %v", attempts, got.took.Round(time.Millisecond), got.answers)
	want := map[string]int{"200": amount, "429 " + apicode.KeyCreditsExhausted: attempts - amount}
	if fmt.Sprint(got.answers) != fmt.Sprint(want) {
		t.Errorf("answers %v, want %v", got.answers, want)
	}
	for _, url := range rig.urls {
		var r response
		testenv.Eventually(t, time.Minute, "the server knowing the stranger's key at "+url, func() error {
			var err error
			if r, err = call(url, "Bearer "+stranger); err == nil && r.status == http.StatusUnauthorized {
				err = errors.New("401")
			}
			return err
		})
		if r.status != http.StatusTooManyRequests || r.code != apicode.KeyCreditsExhausted || !strings.Contains(string(r.body), `credit pool \"team\" does not exist`) {
			t.Errorf("the key of another namespace naming the pool, at %s: %d %s", url, r.status, r.body)
		}
	}
	if spent := rig.spentInRedis(t); spent != amount {
		t.Errorf("Redis counts %d credits spent, want %d", spent, amount)
	}
}

// creditsRig is a redis-server, bin/switchboard servers sharing it, and keys with credits (their
// own, or a pool's).
type creditsRig struct {
	redis *testenv.Redis
	kc    string
	urls  []string
	keys  []string
	// probes are the credits the servers' first answers spent while the test waited for them.
	probes int
}

// startCreditsRig issues a key with amount credits a month and no rate, and starts redis-server
// with redisArgs and creditsReplicas servers on it, each of which has answered the key once.
func startCreditsRig(t *testing.T, name string, amount int64, redisArgs ...string) *creditsRig {
	t.Helper()
	rig := newCreditsRig(t, redisArgs...)
	rig.keys = []string{issueWith(t, env.Namespace(t, name), "plan", switchboardv1alpha1.APIKeySpec{
		Credits: &switchboardv1alpha1.APIKeyCredits{Amount: amount, Refill: switchboardv1alpha1.CreditsMonthly}})}
	rig.startServers(t)
	return rig
}

// newCreditsRig starts the operator and redis-server with redisArgs: a rig without keys or
// servers yet.
func newCreditsRig(t *testing.T, redisArgs ...string) *creditsRig {
	t.Helper()
	ensureSystemNamespace(t)
	kc := kubeconfig(t, env.Config, apiServerHostPort(t))
	startOperator(t, "operator", kc, "--leader-elect=false")
	return &creditsRig{redis: testenv.StartRedis(t, redisArgs...), kc: kc}
}

// startServers starts creditsReplicas servers on the rig's Redis and waits until each has
// answered each key once.
func (rig *creditsRig) startServers(t *testing.T) {
	t.Helper()
	for range creditsReplicas {
		_, api, _ := startServer(t, rig.kc, "--auth-failure-rate=0", "--rate-limit-redis="+rig.redis.URL(),
			"--rate-limit-redis-timeout="+creditsRedisTimeout)
		rig.urls = append(rig.urls, api+"/v1/connections")
	}
	// Until a server knows a key and its credits, it answers 401 (or, for a key of a pool it
	// does not know yet, 429 saying so), spending nothing: the first 200 is the first credit
	// spent.
	for _, url := range rig.urls {
		for _, key := range rig.keys {
			testenv.Eventually(t, time.Minute, "the server answering the key at "+url, func() error {
				r, err := call(url, "Bearer "+key)
				if err != nil {
					return err
				}
				if r.status != http.StatusOK {
					return fmt.Errorf("%d %s", r.status, r.code)
				}
				rig.probes++
				return nil
			})
		}
	}
}

// unavailableBackoff is how long a client refused 503 waits before its next attempt, as a
// client backs off from a server that is not ready: without it, the attempts would all be
// spent in the second Redis is away, none left to see admissions resume.
const unavailableBackoff = 10 * time.Millisecond

// spent is what spend saw: how many of each answer ("200", "429 CODE", "error: …") and how long
// it took.
type spent struct {
	answers map[string]int
	took    time.Duration
}

// spend makes attempts requests from creditsClients clients, client i with the key i mod the
// rig's keys on the server i mod creditsReplicas (so every key reaches every server), each on its kept-alive connection, calling during (if not nil)
// before each attempt with its number (from 1) and the count of 200s so far. The servers'
// probes count as attempts and admissions.
func (rig *creditsRig) spend(t *testing.T, attempts int, during func(attempt int, admitted *atomic.Int64)) spent {
	t.Helper()
	var next, admitted atomic.Int64
	next.Store(int64(rig.probes))
	admitted.Store(int64(rig.probes))
	var mu sync.Mutex
	answers := map[string]int{"200": rig.probes}
	start := time.Now()
	var clients sync.WaitGroup
	for i := range creditsClients {
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		url, key := rig.urls[i%len(rig.urls)], rig.keys[i%len(rig.keys)]
		clients.Go(func() {
			defer c.CloseIdleConnections()
			mine := map[string]int{}
			for n := int(next.Add(1)); n <= attempts; n = int(next.Add(1)) {
				if during != nil {
					during(n, &admitted)
				}
				r, err := callWith(c, url, "Bearer "+key)
				switch {
				case err != nil:
					mine["error: "+err.Error()]++
				case r.status == http.StatusOK:
					admitted.Add(1)
					mine["200"]++
				default:
					mine[strconv.Itoa(r.status)+" "+r.code]++
					if r.status == http.StatusServiceUnavailable {
						time.Sleep(unavailableBackoff)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k, v := range mine {
				answers[k] += v
			}
		})
	}
	clients.Wait()
	return spent{answers: answers, took: time.Since(start)}
}

// spentInRedis is the count of spent credits in Redis: the current period's, in the one credit
// record there, the key's or its pool's.
func (rig *creditsRig) spentInRedis(t *testing.T) int {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	c := redis.NewClient(&redis.Options{Addr: rig.redis.Addr()})
	defer func() { _ = c.Close() }()
	var counts []string
	for _, k := range c.Keys(ctx, "switchboard:*").Val() {
		counts = append(counts, c.HGet(ctx, k, "s").Val())
	}
	if len(counts) != 1 {
		t.Fatalf("Redis holds credit records spending %v, want one", counts)
	}
	n, err := strconv.Atoi(counts[0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var redisPid = regexp.MustCompile(`(?m)^process_id:(\d+)\r?$`)

// killRedis SIGKILLs redis-server, as a crash or a node loss would, and returns once it is
// gone.
func (rig *creditsRig) killRedis(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: rig.redis.Addr()})
	defer func() { _ = c.Close() }()
	info, err := c.Info(ctx, "server").Result()
	m := redisPid.FindStringSubmatch(info)
	if err != nil || m == nil {
		t.Errorf("no process_id in Redis's INFO: %v", err)
		return
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Error(err)
		return
	}
	for c.Ping(ctx).Err() == nil {
		time.Sleep(time.Millisecond)
	}
}
