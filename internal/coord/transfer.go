package coord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// MaxResultBytes bounds one worker's result, and every chunk the coordinator holds at once.
const MaxResultBytes = 64 << 20

// chunkSet is one worker's result chunks of the current task.
type chunkSet struct {
	parts [][]byte
	have  int
	bytes int
}

// arrival is one worker's delivered result.
type arrival struct {
	index int
	data  []byte
	err   string
}

func (c *Coordinator) onChunk(m *nats.Msg) {
	if c.sig.check(m) != nil {
		return
	}
	if err := c.takeChunk(m); err != nil {
		c.sig.count(RefusedChunk)
		c.log.Warn("refusing a result chunk", "err", err)
		_ = c.sig.reply(c.nc, m, TaskReply{Reason: err.Error()})
		return
	}
	_ = c.sig.reply(c.nc, m, TaskReply{Accepted: true})
}

// takeChunk keeps an authenticated chunk: only of the current task, from the joined worker that
// sent it, numbered below the count it announced, and within MaxResultBytes of chunks held.
func (c *Coordinator) takeChunk(m *nats.Msg) error {
	idx, err1 := strconv.Atoi(m.Header.Get(hdrIndex))
	task, err2 := strconv.Atoi(m.Header.Get(hdrTask))
	seq, err3 := strconv.Atoi(m.Header.Get(hdrSeq))
	of, err4 := strconv.Atoi(m.Header.Get(hdrOf))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("coord: chunk headers: %w", err)
	}
	if sender(m) != workerFrom(idx) {
		return fmt.Errorf("coord: chunk for worker %d sent by %q", idx, sender(m))
	}
	if of < 1 || of > MaxResultBytes/ChunkSize || seq < 0 || seq >= of || len(m.Data) > ChunkSize {
		return fmt.Errorf("coord: chunk %d of %d (%d bytes) is out of bounds (at most %d chunks of %d bytes)", seq, of, len(m.Data), MaxResultBytes/ChunkSize, ChunkSize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts := c.cur; ts == nil || ts.id != task || idx < 0 || idx >= len(c.workers) || c.workers[idx] == nil || ts.good[idx] {
		return fmt.Errorf("coord: chunk of task %d for worker %d: no such task is waiting for that worker's result", task, idx)
	}
	key := fmt.Sprintf("%d/%d", task, idx)
	cs := c.chunks[key]
	if cs == nil {
		cs = &chunkSet{parts: make([][]byte, of)}
		c.chunks[key] = cs
	}
	if len(cs.parts) != of {
		return fmt.Errorf("coord: chunk announces %d chunks; worker %d announced %d", of, idx, len(cs.parts))
	}
	if cs.parts[seq] != nil {
		c.sig.count(RefusedDuplicate) // the worker resent it after a slow acknowledgement
		return nil
	}
	if c.chunkBytes+len(m.Data) > MaxResultBytes {
		return fmt.Errorf("coord: result chunks held would pass %d bytes", MaxResultBytes)
	}
	cs.parts[seq] = slices.Clone(m.Data)
	cs.have++
	cs.bytes += len(m.Data)
	c.chunkBytes += len(m.Data)
	return nil
}

func (c *Coordinator) onResult(m *nats.Msg) {
	var r ResultMsg
	if err := c.sig.open(m, &r); err != nil {
		return
	}
	if sender(m) != workerFrom(r.Index) || r.Index < 0 || r.Index >= c.cfg.Workers {
		c.sig.count(RefusedSender)
		return
	}
	c.mu.Lock()
	ts := c.cur
	current := ts != nil && ts.id == r.Task && c.workers[r.Index] != nil
	repeat := current && ts.good[r.Index]
	if w := c.workers[r.Index]; w != nil {
		if rf := cleanRefusals(r.Refused); rf != nil {
			w.Refused = rf
		}
	}
	c.mu.Unlock()
	if repeat {
		c.sig.count(RefusedDuplicate)
	}
	if !current || repeat {
		// A result of another task, or a repeat of one already kept: acknowledged, not fetched.
		_ = c.sig.reply(c.nc, m, TaskReply{Accepted: true})
		return
	}
	a := arrival{index: r.Index, err: r.Err}
	if r.Err == "" {
		b, err := c.fetch(r)
		if err != nil {
			a.err = err.Error()
		} else {
			a.data = b
		}
	}
	_ = c.sig.reply(c.nc, m, TaskReply{Accepted: true})
	c.mu.Lock()
	if a.err != "" {
		c.workers[r.Index].Error = a.err
	} else {
		ts.good[r.Index] = true
	}
	c.mu.Unlock()
	select {
	case ts.results <- a:
	default: // await holds one arrival per worker; a later error for a counted index is dropped
	}
}

// fetch reads a result from the object store or the received chunks and checks its SHA-256.
func (c *Coordinator) fetch(r ResultMsg) ([]byte, error) {
	var b []byte
	switch {
	case r.Size < 0 || r.Size > MaxResultBytes:
		return nil, fmt.Errorf("coord: result of worker %d announces %d bytes; at most %d are taken", r.Index, r.Size, MaxResultBytes)
	case r.Object != "":
		if c.obs == nil {
			return nil, errors.New("coord: result in an object store this coordinator did not open")
		}
		if r.Object != objectName(r.Task, r.Index) {
			return nil, fmt.Errorf("coord: worker %d names object %q; its result of task %d is %s", r.Index, r.Object, r.Task, objectName(r.Task, r.Index))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		info, err := c.obs.GetInfo(ctx, r.Object)
		if err != nil {
			return nil, fmt.Errorf("coord: reading result %s from the object store: %w", r.Object, err)
		}
		if info.Size != uint64(r.Size) {
			_ = c.obs.Delete(ctx, r.Object)
			return nil, fmt.Errorf("coord: result of worker %d holds %d bytes in the object store; its announcement says %d", r.Index, info.Size, r.Size)
		}
		if b, err = c.obs.GetBytes(ctx, r.Object); err != nil {
			return nil, fmt.Errorf("coord: reading result %s from the object store: %w", r.Object, err)
		}
		_ = c.obs.Delete(ctx, r.Object)
	default:
		key := fmt.Sprintf("%d/%d", r.Task, r.Index)
		c.mu.Lock()
		cs := c.chunks[key]
		delete(c.chunks, key)
		if cs != nil {
			c.chunkBytes -= cs.bytes
		}
		c.mu.Unlock()
		if cs == nil || cs.have != r.Chunks || len(cs.parts) != r.Chunks {
			have := 0
			if cs != nil {
				have = cs.have
			}
			return nil, fmt.Errorf("coord: result of worker %d arrived in %d of %d chunks", r.Index, have, r.Chunks)
		}
		for _, p := range cs.parts {
			b = append(b, p...)
		}
	}
	sum := sha256.Sum256(b)
	if len(b) != r.Size || hex.EncodeToString(sum[:]) != r.SHA256 {
		return nil, fmt.Errorf("coord: result of worker %d is damaged (%d bytes, want %d, checksum mismatch)", r.Index, len(b), r.Size)
	}
	return b, nil
}

// objectName is the object store name of worker i's result of a task.
func objectName(task, i int) string { return fmt.Sprintf("task-%d-worker-%d.json", task, i) }
