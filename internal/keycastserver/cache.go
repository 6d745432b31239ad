package keycastserver

import (
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/loadproof/loadproof/internal/admit"
	"github.com/loadproof/loadproof/internal/keycast"
)

// authState is what every cached handler of one authorization shares: revoking the
// authorization flips revoked for all of them at once, even for a handler that a concurrent
// cache miss inserts after the revocation pass.
type authState struct {
	id        int64
	expiresAt int64 // Unix nanoseconds; 0 = never (oauth_authorizations.expires_at NULL)
	revoked   atomic.Bool
	keys      map[tokenKey]struct{} // guarded by handlerCache.mu
}

// tokenKey is SHA-256 of the bearer token string.
type tokenKey [32]byte

// rpcHandler is a cached, ready-to-use authorization: the decrypted user key, the policy rules
// and the precomputed get_public_key answer. Immutable after construction except lastUsed and
// the rate bucket.
type rpcHandler struct {
	key          tokenKey
	auth         *authState
	signer       *keycast.Signer
	userPub      keycast.PublicKey
	userPubHex   string
	perms        []keycast.Permission
	tokenExp     int64  // UCAN exp, Unix seconds
	pubkeyResult []byte // {"result":"<user pubkey hex>"}
	lastUsed     atomic.Int64

	rateMu sync.Mutex
	rate   *admit.Bucket // nil when rate limiting is off
}

// lookup outcomes of handlerCache.get.
const (
	cacheHit = iota
	cacheMiss
	cacheInvalid // found but revoked or expired: evicted, the caller answers 401
)

// handlerCache is the RPC handler cache: an LRU bounded by HANDLER_CACHE_SIZE with idle expiry,
// keyed by SHA-256 of the token, indexed by authorization id for immediate revocation.
type handlerCache struct {
	lru  *lru.Cache[tokenKey, *rpcHandler]
	idle int64 // nanoseconds

	mu         sync.Mutex
	byAuth     map[int64]*authState
	tombstones map[int64]int64 // authorization id -> Unix nanoseconds revoked
	tombTTL    int64
}

func newHandlerCache(size int, idle, tombTTL time.Duration) *handlerCache {
	c := &handlerCache{
		idle:       int64(idle),
		byAuth:     make(map[int64]*authState),
		tombstones: make(map[int64]int64),
		tombTTL:    int64(tombTTL),
	}
	l, err := lru.NewWithEvict(size, c.onEvict)
	if err != nil {
		panic("keycastserver: handler cache size must be positive: " + err.Error())
	}
	c.lru = l
	return c
}

// onEvict runs after the LRU dropped an entry (capacity, Remove); never under the LRU lock.
func (c *handlerCache) onEvict(k tokenKey, h *rpcHandler) {
	c.mu.Lock()
	st := h.auth
	delete(st.keys, k)
	if len(st.keys) == 0 && c.byAuth[st.id] == st {
		delete(c.byAuth, st.id)
	}
	c.mu.Unlock()
}

// get returns the handler for k at now (Unix nanoseconds). An entry that went idle, whose
// authorization was revoked or expired, or whose token expired is evicted.
func (c *handlerCache) get(k tokenKey, now int64) (*rpcHandler, int) {
	h, ok := c.lru.Get(k)
	if !ok {
		return nil, cacheMiss
	}
	if now-h.lastUsed.Load() > c.idle {
		c.lru.Remove(k)
		return nil, cacheMiss
	}
	if h.auth.revoked.Load() || (h.auth.expiresAt != 0 && now > h.auth.expiresAt) || h.tokenExp < now/int64(time.Second) {
		c.lru.Remove(k)
		return nil, cacheInvalid
	}
	h.lastUsed.Store(now)
	return h, cacheHit
}

// put caches h unless its authorization was revoked meanwhile (reported as false). Handlers of
// the same authorization share one authState.
func (c *handlerCache) put(h *rpcHandler, now int64) bool {
	c.mu.Lock()
	if _, dead := c.tombstones[h.auth.id]; dead {
		c.mu.Unlock()
		return false
	}
	st, ok := c.byAuth[h.auth.id]
	if !ok {
		st = h.auth
		st.keys = make(map[tokenKey]struct{}, 1)
		c.byAuth[st.id] = st
	}
	h.auth = st
	st.keys[h.key] = struct{}{}
	c.mu.Unlock()
	h.lastUsed.Store(now)
	c.lru.Add(h.key, h)
	return true
}

// revoke marks authorizations revoked and evicts their handlers at once. A tombstone keeps a
// cache miss that read the row before the revocation from caching it afterwards.
func (c *handlerCache) revoke(ids []int64, now int64) int {
	var keys []tokenKey
	c.mu.Lock()
	for id, at := range c.tombstones {
		if now-at > c.tombTTL {
			delete(c.tombstones, id)
		}
	}
	for _, id := range ids {
		c.tombstones[id] = now
		if st, ok := c.byAuth[id]; ok {
			st.revoked.Store(true)
			for k := range st.keys {
				keys = append(keys, k)
			}
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.lru.Remove(k)
	}
	return len(keys)
}

// sweep drops idle entries from the cold end of the LRU (the least recently used are the
// longest idle) and returns how many it dropped; at most limit per call.
func (c *handlerCache) sweep(now int64, limit int) int {
	n := 0
	for n < limit {
		k, h, ok := c.lru.GetOldest()
		if !ok || now-h.lastUsed.Load() <= c.idle {
			break
		}
		c.lru.Remove(k)
		n++
	}
	return n
}

func (c *handlerCache) len() int { return c.lru.Len() }
