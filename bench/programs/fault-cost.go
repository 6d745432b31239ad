//go:build ignore

// Command fault-cost measures what a first touch of fresh anonymous memory costs on this machine
// (page faults of 4 KiB pages and of 2 MiB huge pages): docs/load-testing.md, the 200,000 ramp.
//
//	go run bench/programs/fault-cost.go
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func touch(size int, huge bool) time.Duration {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		panic(err)
	}
	if huge {
		if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
			panic(err)
		}
	}
	var r0, r1 syscall.Rusage
	syscall.Getrusage(0, &r0)
	t := time.Now()
	for i := 0; i < size; i += 4096 {
		b[i] = 1
	}
	d := time.Since(t)
	syscall.Getrusage(0, &r1)
	fmt.Printf("huge=%v: %v per 4 KiB page, minflt %d\n", huge, d/time.Duration(size/4096), r1.Minflt-r0.Minflt)
	unix.Munmap(b)
	return d
}

func main() {
	size := 3 << 30
	for i := 0; i < 2; i++ {
		touch(size, false)
		touch(size, true)
	}
	_ = os.Stdout
}
