package spool_test

import (
	"testing"

	"github.com/muster-tool/muster/spool"
)

// sizesOnly hides Dir.ListNames, as a backend whose listing has sizes.
type sizesOnly struct{ spool.Spool }

func TestListQuick(t *testing.T) {
	d, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, n := range []string{"report/a/1", "report/a/2", "report/b/1", "brief/a/1"} {
		if err := d.Put(ctx, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		sp   spool.Spool
		size int64
	}{{"directory", d, -1}, {"with sizes", sizesOnly{d}, int64(len("report/a/1"))}} {
		var got []spool.Info
		if err := spool.ListQuick(ctx, c.sp, "report/", func(i spool.Info) error { got = append(got, i); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Name != "report/a/1" || got[2].Name != "report/b/1" {
			t.Fatalf("%s: listed %v", c.name, got)
		}
		for _, i := range got {
			if i.Size != c.size {
				t.Errorf("%s: %s size %d, want %d", c.name, i.Name, i.Size, c.size)
			}
		}
	}
}
