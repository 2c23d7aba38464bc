package lastused

import (
	"fmt"
	"hash/maphash"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
	"github.com/switchboard-dev/switchboard/internal/server/keyindex/keyindextest"
)

// usageState is one key's state for the scheduling tests, as offsets from now; nil is never.
type usageState struct {
	name      string
	used      *time.Duration // last use
	written   *time.Duration // the use this replica last wrote, written at writtenAt
	writtenAt *time.Duration
	cached    *time.Duration // status.lastUsedAt in the cache (any replica's write)
}

func ago(d time.Duration) *time.Duration { return &d }

// indexWith builds an index holding keys in the given states at now.
func indexWith(t *testing.T, now time.Time, states []usageState) *keyindex.Index {
	t.Helper()
	idx := keyindex.New()
	for _, s := range states {
		ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: s.name, UID: types.UID("uid-" + s.name)}}
		if s.cached != nil {
			ak.Status.LastUsedAt = &metav1.Time{Time: now.Add(-*s.cached).Truncate(time.Second)}
		}
		if err := keyindextest.PutAPIKey(idx, ak); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range idx.Keys() {
		i := slices.IndexFunc(states, func(s usageState) bool { return s.name == k.Name })
		s := states[i]
		if s.written != nil {
			k.Usage().Touch(now.Add(-*s.written))
			k.Usage().MarkWritten(now.Add(-*s.written), now.Add(-*s.writtenAt))
		}
		if s.used != nil {
			k.Usage().Touch(now.Add(-*s.used))
		}
	}
	return idx
}

func testWriter(now time.Time, perSecond float64) *Writer {
	return &Writer{
		clock: clocktesting.NewFakePassiveClock(now), interval: time.Minute, tick: 10 * time.Second,
		rate: perSecond, timeout: time.Second, log: logr.Discard(), seed: maphash.MakeSeed(),
	}
}

func TestScheduleLastUsedWrites(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	tests := []struct {
		name          string
		keys          []usageState
		perSecond     float64 // budget per flush = perSecond × 10s
		want          []string
		wantBacklog   int
		wantStaleness time.Duration
	}{
		{name: "a key never used is not written", perSecond: 20,
			keys: []usageState{{name: "idle"}}},
		{name: "a used key never written is", perSecond: 20,
			keys: []usageState{{name: "new", used: ago(5 * time.Second)}},
			want: []string{"new"}, wantStaleness: 5 * time.Second},
		{name: "no use since this replica's last write: nothing to write", perSecond: 20,
			keys: []usageState{{name: "quiet", written: ago(2 * time.Minute), writtenAt: ago(2 * time.Minute)}}},
		{name: "written by this replica within the interval: not again yet", perSecond: 20,
			keys: []usageState{{name: "recent", written: ago(40 * time.Second), writtenAt: ago(30 * time.Second), used: ago(time.Second)}}},
		{name: "written by this replica over an interval ago and used since: due", perSecond: 20,
			keys: []usageState{{name: "again", written: ago(2 * time.Minute), writtenAt: ago(2 * time.Minute), used: ago(time.Second)}},
			want: []string{"again"}, wantStaleness: 2 * time.Minute},
		{name: "another replica wrote a use within the interval: skipped", perSecond: 20,
			keys: []usageState{{name: "theirs", cached: ago(40 * time.Second), used: ago(5 * time.Second)}}},
		{name: "another replica's write is over an interval older than the use: due", perSecond: 20,
			keys: []usageState{{name: "old", cached: ago(3 * time.Minute), used: ago(5 * time.Second)}},
			want: []string{"old"}, wantStaleness: 3 * time.Minute},
		{name: "over budget: never written first, then the stalest; the rest waits", perSecond: 0.2,
			keys: []usageState{
				{name: "ten-minutes", cached: ago(10 * time.Minute), used: ago(time.Second)},
				{name: "never", used: ago(2 * time.Second)},
				{name: "three-minutes", cached: ago(3 * time.Minute), used: ago(time.Second)},
				{name: "an-hour", cached: ago(time.Hour), used: ago(time.Second)},
				{name: "idle", cached: ago(time.Hour)},
			},
			want: []string{"never", "an-hour"}, wantBacklog: 2, wantStaleness: time.Hour},
		{name: "a budget under one write a flush still writes one", perSecond: 0.001,
			keys: []usageState{{name: "a", used: ago(time.Second)}, {name: "b", cached: ago(time.Hour), used: ago(time.Second)}},
			want: []string{"a"}, wantBacklog: 1, wantStaleness: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := testWriter(now, tt.perSecond)
			plan := u.schedule(indexWith(t, now, tt.keys).Keys(), now)
			var got []string
			for _, d := range plan.batch {
				got = append(got, d.key.Name)
				if want := d.key.Usage().LastUsed().Truncate(time.Second); !d.at.Equal(want) {
					t.Errorf("%s: writes %v, want the last use to the second %v", d.key.Name, d.at, want)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("batch = %v, want %v", got, tt.want)
			}
			if plan.backlog != tt.wantBacklog {
				t.Errorf("backlog = %d, want %d", plan.backlog, tt.wantBacklog)
			}
			// Stored times are whole seconds; allow for the truncation.
			if d := plan.staleness - tt.wantStaleness; d < 0 || d >= time.Second {
				t.Errorf("staleness = %v, want %v", plan.staleness, tt.wantStaleness)
			}
		})
	}
}

// TestReplicasOverBudgetPickDifferentKeys: two replicas with the same equally stale keys and
// a budget of a tenth of them do not both write the same tenth.
func TestReplicasOverBudgetPickDifferentKeys(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var states []usageState
	for i := range 1000 {
		states = append(states, usageState{name: fmt.Sprintf("k%04d", i), cached: ago(time.Hour), used: ago(time.Second)})
	}
	keys := indexWith(t, now, states).Keys()
	picked := func() map[string]bool {
		plan := testWriter(now, 10).schedule(keys, now) // 100 a flush
		if len(plan.batch) != 100 || plan.backlog != 900 {
			t.Fatalf("batch %d, backlog %d; want 100 and 900", len(plan.batch), plan.backlog)
		}
		m := map[string]bool{}
		for _, d := range plan.batch {
			m[d.key.Name] = true
		}
		return m
	}
	a, b := picked(), picked()
	both := 0
	for k := range a {
		if b[k] {
			both++
		}
	}
	// Independent picks of 100 in 1000 share 10 on average; 50 would be a broken tie-break.
	if both >= 50 {
		t.Errorf("two replicas picked %d of the same 100 keys", both)
	}
}

// TestLastUsedBudgetAt20000ActiveKeys simulates 20,000 keys used without pause, flushed
// every 10 s with the default budget of 20 writes a second, on an injected clock: the writer
// never exceeds its budget, every key is written in each round of 20,000/20 = 1,000 s, and the
// oldest lastUsedAt of a key in use stays within one round, plus an interval (keys as stale to
// the interval are written in any order) and a flush.
func TestLastUsedBudgetAt20000ActiveKeys(t *testing.T) {
	const n, perSecond = 20000, 20.0
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	u := testWriter(start, perSecond)
	u.clock = clk
	idx := keyindex.New()
	for i := range n {
		if err := keyindextest.PutAPIKey(idx, &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint("uid-", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	keys := idx.Keys()
	writes := map[types.UID]int{}
	total := 0
	round := time.Duration(n/perSecond) * time.Second
	var maxStale time.Duration
	const ticks = 250 // 2,500 s: two and a half rounds
	for tick := 1; tick <= ticks; tick++ {
		now := start.Add(time.Duration(tick) * u.tick)
		clk.SetTime(now)
		for _, k := range keys {
			k.Usage().Touch(now.Add(-time.Second))
		}
		plan := u.schedule(keys, now)
		if len(plan.batch) > u.budget() {
			t.Fatalf("tick %d: %d writes, over the budget of %d", tick, len(plan.batch), u.budget())
		}
		if len(plan.batch)+plan.backlog > n {
			t.Fatalf("tick %d: %d due, more than the %d keys", tick, len(plan.batch)+plan.backlog, n)
		}
		for _, d := range plan.batch {
			d.key.Usage().MarkWritten(d.used, now)
			writes[d.key.UID]++
			total++
		}
		if now.Sub(start) > round+u.tick {
			maxStale = max(maxStale, plan.staleness)
		}
	}
	elapsed := time.Duration(ticks) * u.tick
	if got, want := float64(total)/elapsed.Seconds(), perSecond; got != want {
		t.Errorf("%.1f writes/s, want the budget, %.0f", got, want)
	}
	for _, k := range keys {
		if w := writes[k.UID]; w < 2 || w > 3 {
			t.Fatalf("key %s written %d times in %s, want 2 or 3 (one per %s round)", k.Name, w, elapsed, round)
		}
	}
	if maxStale > round+u.interval+u.tick {
		t.Errorf("the oldest lastUsedAt in use reached %s, want within one round (%s), an interval and a flush", maxStale, round)
	}
	t.Logf("%d active keys, %.0f writes/s budget: %d writes in %s; every key rewritten every %s; oldest lastUsedAt %s", n, perSecond, total, elapsed, round, maxStale)
}

// TestSchedulePreviousKeyUse: the last use of the old key during a rotation's grace goes into
// the same patch as lastUsedAt, within the same interval per key, and only when it is newer than
// what this replica wrote and than what the API server holds of that generation.
func TestSchedulePreviousKeyUse(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	type prev struct {
		gen int64
		ago time.Duration
	}
	tests := []struct {
		name      string
		used      *time.Duration // last use of any generation
		prevUsed  *prev          // last use of the old key
		written   *prev          // the old key's use this replica last wrote
		writtenAt *time.Duration // when this replica last wrote the key
		cached    *prev          // status.previousKeyUse in the cache
		cachedAt  *time.Duration // status.lastUsedAt in the cache
		want      *prev          // previousKeyUse written (nil: the key is not due, or without it)
		wantDue   bool
		wantAt    *time.Duration // lastUsedAt written, when not the last use
	}{
		{name: "no old key in use: lastUsedAt alone", used: ago(5 * time.Second), wantDue: true},
		{name: "the old key used, never written: written with lastUsedAt",
			used: ago(5 * time.Second), prevUsed: &prev{3, 5 * time.Second}, want: &prev{3, 5 * time.Second}, wantDue: true},
		{name: "the old key used, this replica wrote the key within the interval: not yet",
			used: ago(5 * time.Second), prevUsed: &prev{3, 5 * time.Second}, writtenAt: ago(30 * time.Second)},
		{name: "the old key's use already written by this replica: lastUsedAt alone",
			used: ago(2 * time.Second), prevUsed: &prev{3, 90 * time.Second}, written: &prev{3, 90 * time.Second}, writtenAt: ago(90 * time.Second),
			wantDue: true},
		{name: "the cache holds that use or a later one (another replica): lastUsedAt alone",
			used: ago(2 * time.Second), prevUsed: &prev{3, 90 * time.Second}, cached: &prev{3, 80 * time.Second}, cachedAt: ago(80 * time.Second),
			wantDue: true},
		{name: "the cache holds an older rotation's use: this one is written",
			used: ago(2 * time.Second), prevUsed: &prev{3, 2 * time.Second}, cached: &prev{2, time.Hour}, cachedAt: ago(2 * time.Minute),
			want: &prev{3, 2 * time.Second}, wantDue: true},
		{name: "another replica wrote lastUsedAt within the interval but not the old key's use: due anyway",
			used: ago(2 * time.Second), prevUsed: &prev{3, 2 * time.Second}, cachedAt: ago(20 * time.Second),
			want: &prev{3, 2 * time.Second}, wantDue: true},
		{name: "the cache's lastUsedAt is later than this replica's: it is kept",
			used: ago(40 * time.Second), prevUsed: &prev{3, 40 * time.Second}, cachedAt: ago(20 * time.Second),
			want: &prev{3, 40 * time.Second}, wantDue: true, wantAt: ago(20 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := keyindex.New()
			ak := &switchboardv1alpha1.APIKey{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k", UID: "uid-k"}}
			if tt.cachedAt != nil {
				ak.Status.LastUsedAt = &metav1.Time{Time: now.Add(-*tt.cachedAt).Truncate(time.Second)}
			}
			if tt.cached != nil {
				ak.Status.PreviousKeyUse = &switchboardv1alpha1.APIKeyPreviousKeyUse{KeyGeneration: tt.cached.gen, LastUsedAt: metav1.Time{Time: now.Add(-tt.cached.ago).Truncate(time.Second)}}
			}
			if err := keyindextest.PutAPIKey(idx, ak); err != nil {
				t.Fatal(err)
			}
			usage := idx.Keys()[0].Usage()
			if tt.writtenAt != nil {
				at := now.Add(-*tt.writtenAt)
				usage.Touch(at.Add(-time.Second))
				usage.MarkWritten(at.Add(-time.Second), at)
			}
			if tt.written != nil {
				usage.MarkPreviousWritten(keyindex.PreviousUse{Generation: tt.written.gen, At: now.Add(-tt.written.ago)})
			}
			if tt.used != nil {
				usage.Touch(now.Add(-*tt.used))
			}
			if tt.prevUsed != nil {
				usage.TouchPrevious(tt.prevUsed.gen, now.Add(-tt.prevUsed.ago))
			}
			plan := testWriter(now, 20).schedule(idx.Keys(), now)
			if got := len(plan.batch) == 1; got != tt.wantDue {
				t.Fatalf("due = %v, want %v", got, tt.wantDue)
			}
			if !tt.wantDue {
				return
			}
			d := plan.batch[0]
			wantAt := now.Add(-*tt.used).Truncate(time.Second)
			if tt.wantAt != nil {
				wantAt = now.Add(-*tt.wantAt).Truncate(time.Second)
			}
			if !d.at.Equal(wantAt) {
				t.Errorf("lastUsedAt written %v, want %v", d.at, wantAt)
			}
			var want keyindex.PreviousUse
			if tt.want != nil {
				want = keyindex.PreviousUse{Generation: tt.want.gen, At: now.Add(-tt.want.ago).Truncate(time.Second)}
			}
			if d.prevAt.Generation != want.Generation || !d.prevAt.At.Equal(want.At) {
				t.Errorf("previousKeyUse written %+v, want %+v", d.prevAt, want)
			}
			if d.prevAt.Generation != 0 && d.prevAt.At.After(d.at) {
				t.Errorf("previousKeyUse %v after lastUsedAt %v", d.prevAt.At, d.at)
			}
		})
	}
}

// TestTouchPrevious: the request path records the newest use of the newest old generation; a
// request that raced a rotation does not take the record back to an older one.
func TestTouchPrevious(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		touches []keyindex.PreviousUse
		want    keyindex.PreviousUse
	}{
		{name: "none", want: keyindex.PreviousUse{}},
		{name: "one", touches: []keyindex.PreviousUse{{Generation: 2, At: t0}}, want: keyindex.PreviousUse{Generation: 2, At: t0}},
		{name: "a later use a second on", touches: []keyindex.PreviousUse{{Generation: 2, At: t0}, {Generation: 2, At: t0.Add(time.Second)}},
			want: keyindex.PreviousUse{Generation: 2, At: t0.Add(time.Second)}},
		{name: "within a second: kept as it was", touches: []keyindex.PreviousUse{{Generation: 2, At: t0}, {Generation: 2, At: t0.Add(time.Second / 2)}},
			want: keyindex.PreviousUse{Generation: 2, At: t0}},
		{name: "a newer rotation's old key", touches: []keyindex.PreviousUse{{Generation: 2, At: t0}, {Generation: 3, At: t0.Add(time.Millisecond)}},
			want: keyindex.PreviousUse{Generation: 3, At: t0.Add(time.Millisecond)}},
		{name: "an older generation after a newer one: ignored", touches: []keyindex.PreviousUse{{Generation: 3, At: t0}, {Generation: 2, At: t0.Add(time.Minute)}},
			want: keyindex.PreviousUse{Generation: 3, At: t0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u keyindex.Usage
			for _, p := range tt.touches {
				u.TouchPrevious(p.Generation, p.At)
			}
			if got := u.PreviousUsed(); got.Generation != tt.want.Generation || !got.At.Equal(tt.want.At) {
				t.Errorf("PreviousUsed = %+v, want %+v", got, tt.want)
			}
		})
	}
}
