package apply

import (
	"context"
	"fmt"
	"strings"

	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
)

// orphans removes or reports what the ledger holds and the declaration no
// longer names. Orphans that stay owned (their removal failed) go back into
// newLedger.
func orphans(ctx context.Context, sys *resource.System, led ledger.Ledger, specs []resource.Spec, declared map[string]bool, prune bool, newLedger ledger.Ledger) []outcome.Line {
	var lines []outcome.Line
	var remove []resource.Spec
	var removeIDs []string
	for _, e := range led.Orphans(declared) {
		if e.Kind == resource.Directory {
			// A directory that declared paths still lie under stays
			// owned, silently: it goes once they have gone.
			if under := declaredUnder(e.Path, specs); under != "" {
				newLedger[e.ID] = e
				lines = append(lines, outcome.Line{ID: e.ID, Status: outcome.OK, Detail: "orphan: kept while declared " + under + " lies under it"})
				continue
			}
		}
		if removable(e, prune) {
			remove = append(remove, e.Spec())
			removeIDs = append(removeIDs, e.ID)
			continue
		}
		var why string
		switch {
		case e.Kind == resource.Service:
			why = "muster does not remove units"
		case e.Kind == resource.User || e.Kind == resource.Group:
			why = fmt.Sprintf("muster removes a %s only when it is declared state = \"absent\"", e.Kind)
		case e.Kind == resource.Package && e.Created:
			why = "packages are removed only when the declaration sets prune = true"
		default:
			why = "muster did not create it"
		}
		lines = append(lines, outcome.Line{ID: e.ID, Status: outcome.Warn, Detail: "orphan: no declaration names it any more; left in place because " + why})
	}
	if len(remove) == 0 {
		return lines
	}
	for i, r := range sys.RemoveAll(ctx, remove) {
		l := outcome.Line{ID: removeIDs[i], Status: r.Status}
		switch {
		case r.Status == outcome.Failed:
			l.Detail = "orphan could not be removed: " + r.Detail
			newLedger[removeIDs[i]] = led[removeIDs[i]]
		case r.Status == outcome.Warn:
			// Left in place but still owned: it goes once it can.
			l.Detail = "orphan: " + r.Detail
			newLedger[removeIDs[i]] = led[removeIDs[i]]
		case sys.DryRun && r.Status == outcome.Removed:
			l.Detail = "orphan: would be removed"
		case r.Status == outcome.Removed:
			l.Detail = "orphan removed"
		case !sys.DryRun && r.Status == outcome.OK && remove[i].Kind != resource.Package:
			// Owned, and already gone: since this host last kept its
			// ledger it was removed, by a run whose report was lost
			// (see lostChange) or by hand. Either way the mesh has not
			// heard of it.
			l.Status = outcome.Removed
			l.Detail = "orphan removed since this host last reported (by a run whose report was lost, or by hand)"
		default:
			l.Detail = "orphan: " + r.Detail
		}
		lines = append(lines, l)
	}
	return lines
}

// declaredUnder returns the first present path declared below dir, or "".
func declaredUnder(dir string, specs []resource.Spec) string {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for i := range specs {
		s := &specs[i]
		switch s.Kind {
		case resource.File, resource.Directory, resource.Symlink:
			if !declaredAbsent(s) && strings.HasPrefix(s.Path, prefix) {
				return s.Path
			}
		}
	}
	return ""
}

// removable: muster removes only what it created; packages only with prune.
func removable(e ledger.Entry, prune bool) bool {
	if !e.Created {
		return false
	}
	switch e.Kind {
	case resource.File, resource.Directory, resource.Symlink:
		return true
	case resource.Package:
		return prune
	}
	return false
}
