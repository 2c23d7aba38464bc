package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// callCounts counts API-server requests by "VERB resource[/subresource]", the way the API
// server's apiserver_request_total labels them.
type callCounts map[string]float64

// sub returns c - o for every call kind in c.
func (c callCounts) sub(o callCounts) callCounts {
	d := callCounts{}
	for k, v := range c {
		if v-o[k] != 0 {
			d[k] = v - o[k]
		}
	}
	return d
}

// sorted lists the kinds, the most frequent first.
func (c callCounts) sorted() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}

func (c callCounts) total() float64 {
	t := 0.0
	for _, v := range c {
		t += v
	}
	return t
}

// countingTransport counts the requests a client of the bench sends, so that the bench can
// subtract its own calls from the API server's counters.
type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen callCounts
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := callKind(req.Method, req.URL.Path, req.URL.Query().Get("watch") == "true")
	t.mu.Lock()
	t.seen[kind]++
	t.mu.Unlock()
	return t.next.RoundTrip(req)
}

func (t *countingTransport) snapshot() callCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := callCounts{}
	for k, v := range t.seen {
		c[k] = v
	}
	return c
}

// callKind names a request like apiserver_request_total does: LIST and WATCH for collections,
// GET for one object, POST, PATCH, PUT and DELETE; resource[/subresource].
func callKind(method, path string, watch bool) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/… or /apis/<group>/<version>/…, then optionally namespaces/<ns>/.
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return method + " " + path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	var resource, sub string
	named := false
	switch len(parts) {
	case 0:
		return method + " " + path
	case 1:
		resource = parts[0]
	case 2:
		resource, named = parts[0], true
	default:
		resource, sub, named = parts[0], parts[2], true
	}
	verb := method
	if method == http.MethodGet {
		switch {
		case watch:
			verb = "WATCH"
		case !named:
			verb = "LIST"
		}
	}
	if sub != "" {
		resource += "/" + sub
	}
	return verb + " " + resource
}

// apiMetrics is what the bench reads from the API server's /metrics.
type apiMetrics struct {
	calls callCounts
	// storageBytes is apiserver_storage_size_bytes: etcd's database size.
	storageBytes float64
}

// dtoFamily is one parsed metric family.
type dtoFamily = dto.MetricFamily

func labelMap(pairs []*dto.LabelPair) map[string]string {
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.GetName()] = p.GetValue()
	}
	return m
}

// scrapeAPIServer reads the API server's metrics with the admin client.
func scrapeAPIServer(ctx context.Context, cfg *rest.Config) (apiMetrics, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return apiMetrics{}, err
	}
	fams, err := scrape(ctx, hc, strings.TrimSuffix(cfg.Host, "/")+"/metrics")
	if err != nil {
		return apiMetrics{}, err
	}
	m := apiMetrics{calls: callCounts{}}
	for _, mt := range fams["apiserver_request_total"].GetMetric() {
		l := labelMap(mt.GetLabel())
		if l["resource"] == "" {
			continue // /healthz, /metrics, discovery
		}
		kind := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			kind += "/" + l["subresource"]
		}
		if code, _ := strconv.Atoi(l["code"]); code >= 400 {
			kind += " (" + l["code"] + ")"
		}
		m.calls[kind] += mt.GetCounter().GetValue()
	}
	for _, mt := range fams["apiserver_storage_size_bytes"].GetMetric() {
		m.storageBytes += mt.GetGauge().GetValue()
	}
	return m, nil
}

// scrape fetches and parses a Prometheus text endpoint.
func scrape(ctx context.Context, hc *http.Client, url string) (map[string]*dtoFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// metricValue is the value of the first series of name in fams matching the labels given as
// name, value pairs (counter, gauge or untyped); zero when there is none.
func metricValue(fams map[string]*dtoFamily, name string, labels ...string) float64 {
	for _, mt := range fams[name].GetMetric() {
		l := labelMap(mt.GetLabel())
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && l[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case mt.Counter != nil:
			return mt.GetCounter().GetValue()
		case mt.Gauge != nil:
			return mt.GetGauge().GetValue()
		default:
			return mt.GetUntyped().GetValue()
		}
	}
	return 0
}

// childPID is the pid of this process's child named comm (etcd, kube-apiserver).
func childPID(comm string) (int, error) {
	self := strconv.Itoa(os.Getpid())
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	for _, dir := range dirs {
		stat, err := os.ReadFile(filepath.Clean(filepath.Join(dir, "stat")))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		s := string(stat)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(s[closing+1:])
		if s[open+1:closing] != comm || len(fields) < 2 || fields[1] != self {
			continue
		}
		return strconv.Atoi(filepath.Base(dir))
	}
	return 0, fmt.Errorf("no child process %s", comm)
}

// childRSS is the resident set size of this process's child named comm.
func childRSS(comm string) (int64, error) {
	pid, err := childPID(comm)
	if err != nil {
		return 0, err
	}
	return pidRSS(pid)
}

// pidCPU is the CPU time (user and system) pid has used, from /proc/<pid>/stat.
func pidCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// After the comm: state(0) ppid(1) … utime(11) stime(12), in clock ticks of 1/100 s.
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading /proc/%d/stat: %w", pid, errors.Join(err1, err2))
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// cpuMeter reads the CPU time of the system's processes, to tell what a phase cost each of
// them on a machine that others share.
type cpuMeter struct {
	names []string
	pids  []int
}

func (r *rig) newCPUMeter() (*cpuMeter, error) {
	m := &cpuMeter{names: []string{"kube-apiserver", "etcd", "operator", "server"}}
	for _, comm := range m.names[:2] {
		pid, err := childPID(comm)
		if err != nil {
			return nil, err
		}
		m.pids = append(m.pids, pid)
	}
	m.pids = append(m.pids, r.operator.Pid(), r.server.Pid())
	return m, nil
}

// cpuTimes is CPU time by process name.
type cpuTimes map[string]time.Duration

func (m *cpuMeter) read() cpuTimes {
	t := cpuTimes{}
	for i, pid := range m.pids {
		if d, err := pidCPU(pid); err == nil {
			t[m.names[i]] = d
		}
	}
	return t
}

// since is the CPU each process used from before to t.
func (t cpuTimes) since(before cpuTimes) cpuTimes {
	d := cpuTimes{}
	for k, v := range t {
		d[k] = v - before[k]
	}
	return d
}

func (t cpuTimes) total() time.Duration {
	var sum time.Duration
	for _, v := range t {
		sum += v
	}
	return sum
}

// pidRSS reads VmRSS of pid from /proc.
func pidRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// loadAverage is /proc/loadavg's one-minute figure, to show how busy the machine was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
