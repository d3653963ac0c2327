package declare

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestDeclareStopsWhenCancelled: a declare whose context is cancelled, as
// a signal cancels it, stops before its next node and writes nothing.
func TestDeclareStopsWhenCancelled(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-01", nil)
	d := f.parse(webSite, nil)
	before := f.objects()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.ctx = ctx
	if _, err := f.declare(d, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	f.ctx = context.Background()
	if after := f.objects(); !slices.Equal(before, after) {
		t.Errorf("a cancelled declare wrote %v", after)
	}
}
