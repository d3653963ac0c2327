package workpool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestRunsEveryIndexOnce(t *testing.T) {
	var seen [1000]atomic.Int32
	if err := Run(context.Background(), len(seen), 7, func(i int) error { seen[i].Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("index %d ran %d times", i, seen[i].Load())
		}
	}
}

func TestStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	var ran atomic.Int32
	err := Run(context.Background(), 10000, 2, func(i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if ran.Load() > 100 {
		t.Errorf("work went on after the error: %d ran", ran.Load())
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, 10, 2, func(int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}
