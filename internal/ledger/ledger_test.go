package ledger

import (
	"reflect"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
)

func TestOrphansAreOwnedAndUndeclared(t *testing.T) {
	l := FromEntries([]Entry{
		{ID: "file:/etc/a", Kind: resource.File, Path: "/etc/a", Created: true},
		{ID: "file:/etc/b", Kind: resource.File, Path: "/etc/b"},
		{ID: "package:nginx", Kind: resource.Package, Name: "nginx", Created: true},
	})
	got := l.Orphans(map[string]bool{"file:/etc/a": true})
	if len(got) != 2 || got[0].ID != "file:/etc/b" || got[1].ID != "package:nginx" {
		t.Fatalf("orphans = %+v, want /etc/b and nginx in id order", got)
	}
	if s := got[1].Spec(); s.Kind != resource.Package || s.Name != "nginx" || s.ID() != "package:nginx" {
		t.Errorf("spec of an orphan = %+v", s)
	}
	es := l.Entries()
	if len(es) != 3 || es[0].ID > es[1].ID || es[1].ID > es[2].ID {
		t.Errorf("entries not sorted by id: %+v", es)
	}
	if len(FromEntries(nil).Orphans(nil)) != 0 {
		t.Error("an empty ledger has orphans")
	}
}

// InOrder gives Entries for the ledger's ids in order, and nothing for
// ids that are not exactly those, in order.
func TestInOrder(t *testing.T) {
	l := FromEntries([]Entry{
		{ID: "file:/etc/b", Kind: resource.File, Path: "/etc/b"},
		{ID: "file:/etc/a", Kind: resource.File, Path: "/etc/a", Created: true},
		{ID: "package:nginx", Kind: resource.Package, Name: "nginx"},
	})
	if got, want := l.InOrder([]string{"file:/etc/a", "file:/etc/b", "package:nginx"}), l.Entries(); !reflect.DeepEqual(got, want) {
		t.Errorf("in order: %+v, want %+v", got, want)
	}
	for name, ids := range map[string][]string{
		"out of order":  {"file:/etc/b", "file:/etc/a", "package:nginx"},
		"one missing":   {"file:/etc/a", "file:/etc/b"},
		"one not there": {"file:/etc/a", "file:/etc/b", "package:zsh"},
		"one twice":     {"file:/etc/a", "file:/etc/a", "package:nginx"},
	} {
		if got := l.InOrder(ids); got != nil {
			t.Errorf("%s: %+v, want nil", name, got)
		}
	}
}
