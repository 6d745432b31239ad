package keycastload

import "time"

// cacheHitUnder is upstream's cache-hit heuristic: a successful request faster than this was
// probably served from the handler cache.
const cacheHitUnder = 15 * time.Millisecond
