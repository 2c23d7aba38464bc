package satoken

import (
	"crypto/sha256"
	"sync"
	"time"
)

// tokenCache holds verified tokens by their SHA-256, at most len(slots) of them. Entries are placed
// in slots in turn, the next one evicting whatever the slot held (first in, first out), so its
// memory is fixed by its size whatever is presented: only verified tokens enter, and a flood
// of distinct valid ones evicts older entries, which then cost one more verification.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*entry
	slots   [][sha256.Size]byte
	next    int
}

type entry struct {
	workload Workload
	// expires is the token's exp plus the leeway: past it, the token is refused.
	expires time.Time
	// until is when the entry is dropped and the token verified again: expires, or sooner
	// (Options.CacheMaxAge after it was verified).
	until time.Time
	slot  int
}

func newCache(size int) *tokenCache {
	return &tokenCache{entries: make(map[[sha256.Size]byte]*entry, size), slots: make([][sha256.Size]byte, size)}
}

// get returns the entry of sum as of now. Past its expiry it is dropped and reported expired;
// past its until, dropped and not found.
func (c *tokenCache) get(sum *[sha256.Size]byte, now time.Time) (e entry, found, expired bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.entries[*sum]
	if !ok {
		return entry{}, false, false
	}
	if now.After(p.expires) || now.After(p.until) {
		delete(c.entries, *sum)
		return entry{}, false, now.After(p.expires)
	}
	return *p, true, false
}

func (c *tokenCache) put(sum *[sha256.Size]byte, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.entries[*sum]; ok {
		e.slot = p.slot
		*p = e
		return
	}
	old := c.slots[c.next]
	if p, ok := c.entries[old]; ok && p.slot == c.next {
		delete(c.entries, old)
	}
	e.slot = c.next
	c.slots[c.next] = *sum
	c.entries[*sum] = &e
	c.next = (c.next + 1) % len(c.slots)
}

func (c *tokenCache) drop(sum *[sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, *sum)
}

func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
