package resource

// # Purging a directory
//
// A directory whose spec says Purge keeps below it only what the run's
// specs declare present and what the host owns (System.Owns: what an
// earlier run made, which the orphan step removes on its own terms once no
// declaration names it). Everything else below it is removed after every
// other change of the run, deepest first, and named in the directory's
// line.
//
// What is declared is known by what it is, not by how it is named: the
// device and inode of every present declared path, and of every directory
// on the way to one, are kept, so a declared path reached through a
// declared symlink keeps what it names wherever that is. Symlinks below the
// directory are removed or kept themselves and never followed, and a
// directory on another filesystem (a mount point below it) is left whole,
// as rm --one-file-system leaves it. A directory that is not empty once
// its contents are purged (it holds something kept) stays.
//
// The read-back walks the directory again, on the fresh tree, and the line
// fails while anything that would be purged is still there; a dry run names
// what it would purge.

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/muster-tool/muster/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// purgeShown is how many purged paths a line names.
const purgeShown = 5

type fileID struct{ dev, ino uint64 }

// purgeWalk is one walk of the purge directories of a run.
type purgeWalk struct {
	r      *run
	t      *tree
	keep   map[fileID]bool
	remove bool
	batch  *atomicfile.Batch
	// touched: the directories changed by the current purge.
	touched []*atomicfile.Entry
	opened  []*os.File
}

// newPurgeWalk notes what the specs keep, as seen through t. With
// remove, the walk removes what it finds; otherwise it only lists it.
func (r *run) newPurgeWalk(t *tree, remove bool) *purgeWalk {
	w := &purgeWalk{r: r, t: t, keep: map[fileID]bool{}, remove: remove}
	if remove {
		w.batch = &atomicfile.Batch{}
	}
	seen := map[string]bool{}
	for _, it := range r.items {
		if it.err != nil || it.absent || it.leave || !isPath(it.spec.Kind) {
			continue
		}
		d, err := t.dir(it.parent, false)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(int(d.Fd()), it.base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			w.keep[fileID{uint64(st.Dev), st.Ino}] = true
		}
		for p := it.parent; !seen[p]; p, _ = split(p) {
			seen[p] = true
			if dd, err := t.dir(p, false); err == nil && unix.Fstat(int(dd.Fd()), &st) == nil {
				w.keep[fileID{uint64(st.Dev), st.Ino}] = true
			}
			if p == "/" {
				break
			}
		}
	}
	return w
}

func (w *purgeWalk) close() {
	for _, f := range w.opened {
		f.Close()
	}
}

// purge removes, or lists, what is below the directory of it that is
// neither kept nor owned.
func (w *purgeWalk) purge(it *item) ([]string, error) {
	d, err := w.t.dir(it.spec.Path, false)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return nil, pathErr("stat", d, ".", err)
	}
	found, _, err := w.dir(d, it.spec.Path, uint64(st.Dev))
	return found, err
}

// dir walks directory d, named p, on device dev. It returns what it
// purged (a directory purged whole is named once, with a trailing /) and
// whether d is empty once that is gone.
func (w *purgeWalk) dir(d *os.File, p string, dev uint64) ([]string, bool, error) {
	fd, err := unix.Openat(int(d.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, pathErr("open", d, ".", err)
	}
	lf := os.NewFile(uintptr(fd), p)
	names, err := lf.Readdirnames(-1)
	lf.Close()
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", p, err)
	}
	slices.Sort(names)
	var found []string
	empty := true
	touched := false
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue
			}
			return found, false, pathErr("lstat", d, name, err)
		}
		child := path.Join(p, name)
		var kind Kind
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			kind = Directory
		case unix.S_IFREG:
			kind = File
		case unix.S_IFLNK:
			kind = Symlink
		}
		kept := w.keep[fileID{uint64(st.Dev), st.Ino}] || (kind != "" && w.r.s.Owns != nil && w.r.s.Owns(string(kind)+":"+child))
		if kind != Directory {
			if kept {
				empty = false
				continue
			}
			if w.remove {
				if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil && err != unix.ENOENT {
					return found, false, pathErr("remove", d, name, err)
				}
				touched = true
			}
			found = append(found, child)
			continue
		}
		if uint64(st.Dev) != dev {
			empty = false // another filesystem: left whole
			continue
		}
		sfd, err := openDirAt(d, name)
		if err != nil {
			return found, false, pathErr("open directory", d, name, err)
		}
		sub := os.NewFile(uintptr(sfd), child)
		w.opened = append(w.opened, sub)
		inner, subEmpty, err := w.dir(sub, child, dev)
		if err != nil {
			return append(found, inner...), false, err
		}
		if kept || !subEmpty {
			found = append(found, inner...)
			empty = false
			continue
		}
		if w.remove {
			if err := unix.Unlinkat(int(d.Fd()), name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
				return append(found, inner...), false, pathErr("remove", d, name, err)
			}
			touched = true
		}
		found = append(found, child+"/")
	}
	if touched {
		w.touched = append(w.touched, w.batch.Touch(d))
	}
	return found, empty, nil
}

// purge runs after every other change: each purge directory loses what
// is below it that is neither declared nor owned.
func (r *run) purge() {
	var items []*item
	for _, it := range r.items {
		if it.spec.Purge && it.err == nil && it.get().fatal == nil && !it.absent {
			items = append(items, it)
		}
	}
	if len(items) == 0 || r.t == nil {
		return
	}
	w := r.newPurgeWalk(r.t, true)
	defer w.close()
	touched := make([][]*atomicfile.Entry, len(items))
	for i, it := range items {
		if r.interrupted(it) {
			continue
		}
		w.touched = nil
		found, err := w.purge(it)
		touched[i] = w.touched
		if len(found) > 0 {
			it.changed = true
			it.set().what = append(it.set().what, purgeWhat("purged", found))
		}
		if err != nil {
			it.set().fatal = fmt.Errorf("purge: %w", err)
		}
	}
	// The removals hold once their directories are synced.
	w.batch.Commit()
	for i, it := range items {
		for _, e := range touched[i] {
			if err := e.Err(); err != nil && it.get().fatal == nil {
				it.set().fatal = fmt.Errorf("purge: %w", err)
			}
		}
	}
	r.gen++
	r.t.reset()
}

// observePurges lists, for each purge directory, what a purge would remove
// now, through the run's current tree.
func (r *run) observePurges() {
	var items []*item
	for _, it := range r.items {
		if it.spec.Purge && it.err == nil && !it.absent && it.obs.err == nil && it.obs.st.Type == Directory {
			items = append(items, it)
		}
	}
	if len(items) == 0 || r.t == nil {
		return
	}
	w := r.newPurgeWalk(r.t, false)
	defer w.close()
	for _, it := range items {
		var left []string
		left, it.obs.err = w.purge(it)
		if len(left) > 0 || it.more != nil {
			it.set().purgeLeft = left
		}
	}
}

// purgeWhat says what a purge did or would do, naming the first paths.
func purgeWhat(verb string, found []string) string {
	noun := "paths"
	if len(found) == 1 {
		noun = "path"
	}
	shown := found[:min(len(found), purgeShown)]
	s := fmt.Sprintf("%s %d %s neither declared nor owned: %s", verb, len(found), noun, strings.Join(shown, ", "))
	if len(found) > len(shown) {
		s += fmt.Sprintf(" and %d more", len(found)-len(shown))
	}
	return s
}

// purgeMismatch is the read-back of a purge directory: nothing that a
// purge would remove may be left.
func purgeMismatch(it *item) []string {
	if !it.spec.Purge || len(it.get().purgeLeft) == 0 {
		return nil
	}
	return []string{purgeWhat("holds", it.get().purgeLeft) + " (purge = true)"}
}
