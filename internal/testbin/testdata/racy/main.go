// Command racy has a data race, for testbin's test that a race in a binary fails the test.
package main

import (
	"fmt"
	"sync"
)

func main() {
	n := 0
	var wg sync.WaitGroup
	wg.Go(func() { n++ }) // unsynchronized with the write below: the race
	n++
	wg.Wait()
	fmt.Println(n)
}
