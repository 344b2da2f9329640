// A goroutine spinning in a loop without calls: with GOMAXPROCS=1 the main goroutine
// runs again only when the runtime preempts the spinner asynchronously (SIGURG, then
// asyncPreempt → mcall), so the recording holds a preemption and its resume.
package main

import (
	"fmt"
	"sync/atomic"
	"time"
)

var (
	stop int32
	done = make(chan int64)
)

//go:noinline
func spin() {
	n := int64(0)
	for atomic.LoadInt32(&stop) == 0 {
		n++
	}
	done <- n
}

func main() {
	go spin()
	time.Sleep(30 * time.Millisecond)
	atomic.StoreInt32(&stop, 1)
	fmt.Println(<-done > 0)
}
