package spool_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/muster-tool/muster/spool"
)

func TestPutManyKeepsPutsGuarantees(t *testing.T) {
	dir := t.TempDir()
	d, err := spool.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := d.Put(ctx, "decl/a/x", []byte("already")); err != nil {
		t.Fatal(err)
	}
	var objs []spool.Object
	for i := range 300 {
		objs = append(objs, spool.Object{Name: fmt.Sprintf("decl/b/%03d", i), Data: bytes.Repeat([]byte{byte(i)}, 100+i)})
	}
	objs = append(objs, spool.Object{Name: "decl/a/x", Data: []byte("already")}) // same bytes: no-op
	if err := spool.PutMany(ctx, d, objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		got, err := d.Get(ctx, o.Name, 0)
		if err != nil || !bytes.Equal(got, o.Data) {
			t.Fatalf("%s: %v, %d bytes, want %d", o.Name, err, len(got), len(o.Data))
		}
	}
	// Different bytes under an existing name: a conflict, and the object
	// keeps its bytes.
	err = spool.PutMany(ctx, d, []spool.Object{{Name: "decl/c/new", Data: []byte("n")}, {Name: "decl/a/x", Data: []byte("other")}})
	if !errors.Is(err, spool.ErrConflict) {
		t.Fatalf("conflict: got %v", err)
	}
	if got, _ := d.Get(ctx, "decl/a/x", 0); string(got) != "already" {
		t.Errorf("a conflicting batch changed an object: %q", got)
	}
	if err := spool.PutMany(ctx, d, []spool.Object{{Name: "../x", Data: nil}}); !errors.Is(err, spool.ErrBadName) {
		t.Errorf("bad name: got %v", err)
	}
	// No temp file is left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}
