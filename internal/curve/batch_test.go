package curve

import "testing"

// An operation's Batch follows from its own size alone: a table only past
// the number of signatures or shares it pays for itself after.
func TestBatchOf(t *testing.T) {
	for _, c := range []struct {
		n                     int
		signTable, shareTable bool
	}{
		{0, false, false},
		{1, false, false},
		{signTableAfter, false, false},
		{signTableAfter + 1, true, false},
		{shareTableAfter, true, false},
		{shareTableAfter + 1, true, true},
		{10000, true, true},
	} {
		if got, want := BatchOf(c.n), (Batch{signTable: c.signTable, shareTable: c.shareTable}); got != want {
			t.Errorf("BatchOf(%d) = %+v, want %+v", c.n, got, want)
		}
	}
}
