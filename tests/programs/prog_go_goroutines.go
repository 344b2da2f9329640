// Goroutines over channels, a recovered panic and deep recursion (stack growth):
// the call-stack model must keep each goroutine's frames apart across switches.
package main

import (
	"fmt"
	"os"
)

const (
	workers     = 8
	jobsPerWork = 25
)

// Package-level channels: `go f()` without arguments starts f itself (with arguments
// the compiler wraps the call in a closure, main.main.funcN).
var (
	jobs    = make(chan int)
	results = make(chan int)
	done    = make(chan int)
)

// work is called once per job: workers*jobsPerWork times in all.
//
//go:noinline
func work(x int) int {
	s := 0
	for i := 0; i < 50; i++ {
		s += (x ^ i) & 7
	}
	return s
}

//go:noinline
func worker() {
	for j := range jobs {
		results <- work(j)
	}
}

//go:noinline
func mayPanic(n int) (r int) {
	defer func() {
		if p := recover(); p != nil {
			r = -1
		}
	}()
	if n%2 == 1 {
		panic(fmt.Sprintf("odd %d", n))
	}
	return n
}

// deep recurses far enough to grow its goroutine's stack several times (morestack).
//
//go:noinline
func deep(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%64]&1)
}

//go:noinline
func producer() {
	for i := 0; i < workers*jobsPerWork; i++ {
		jobs <- i
	}
	close(jobs)
}

//go:noinline
func deepRoot() {
	done <- deep(2000)
}

func main() {
	for w := 0; w < workers; w++ {
		go worker()
	}
	go producer()
	sum := 0
	for i := 0; i < workers*jobsPerWork; i++ {
		sum += <-results
	}
	recovered := 0
	for i := 0; i < 4; i++ {
		if mayPanic(i) < 0 {
			recovered++
		}
	}
	go deepRoot()
	d := <-done
	fmt.Fprintln(os.Stdout, sum, recovered, d)
}
