// Package workpool runs independent pieces of work on a few goroutines.
// Decoding and sealing bundles is CPU-bound and spool writes wait on the
// disk, so most mesh commands fan their per-object work out through here.
package workpool

import (
	"context"
	"sync"
)

// Run calls fn(0), ..., fn(n-1) on at most workers goroutines and returns
// the first error; after an error or cancellation no new work starts.
func Run(ctx context.Context, n, workers int, fn func(i int) error) error {
	if workers > n {
		workers = n
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
