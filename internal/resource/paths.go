package resource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/muster-tool/muster/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// pathMismatch lists how the state at a path differs from its spec.
func pathMismatch(it *item, st *State) []string {
	s := it.spec
	if it.absent {
		if st.Exists {
			return []string{fmt.Sprintf("%s exists (%s), declared absent", s.Path, st.Type)}
		}
		return nil
	}
	if !st.Exists {
		return []string{s.Path + " does not exist"}
	}
	if st.Type != s.Kind {
		return []string{fmt.Sprintf("%s is a %s, declared %s", s.Path, st.Type, s.Kind)}
	}
	var d []string
	switch s.Kind {
	case File:
		if !st.sameContent {
			d = append(d, fmt.Sprintf("content digest %s ≠ declared %s", short(st.Digest), short(contentDigest(it.content))))
		}
	case Symlink:
		if st.Target != s.Target {
			d = append(d, fmt.Sprintf("target %q ≠ declared %q", st.Target, s.Target))
		}
	}
	if it.mode >= 0 && st.Mode != uint32(it.mode) {
		d = append(d, fmt.Sprintf("mode %s ≠ declared %s", modeString(st.Mode), modeString(uint32(it.mode))))
	}
	if it.uid >= 0 && st.UID != it.uid {
		d = append(d, fmt.Sprintf("owner %d ≠ declared %s", st.UID, idString(s.Owner, it.uid)))
	}
	if it.gid >= 0 && st.GID != it.gid {
		d = append(d, fmt.Sprintf("group %d ≠ declared %s", st.GID, idString(s.Group, it.gid)))
	}
	return d
}

func idString(name string, id int) string {
	if n := strconv.Itoa(id); n != name {
		return fmt.Sprintf("%s (%d)", name, id)
	}
	return name
}

// pathPlan is what it takes to bring a path to its spec.
type pathPlan struct {
	write  bool // new content, new directory or new link
	clear  bool // remove what is there first (a symlink in a directory's way)
	remove bool
	chmod  bool
	chown  bool
	mode   uint32
	uid    int
	gid    int
	what   []string
}

// planPath decides how to change a path whose state mismatches its spec,
// or why muster will not. owns (may be nil) says which resources the host
// owns.
func planPath(it *item, st *State, owns func(id string) bool) (pathPlan, error) {
	s := it.spec
	p := pathPlan{uid: -1, gid: -1}
	if it.absent {
		ok := false
		switch s.Kind {
		case File:
			ok = st.Type == File || st.Type == Symlink
		case Directory, Symlink:
			ok = st.Type == s.Kind
		}
		if !ok {
			return p, fmt.Errorf("%s is a %s, not a %s; muster does not remove it", s.Path, st.Type, s.Kind)
		}
		p.remove = true
		p.what = []string{"remove"}
		return p, nil
	}
	if st.Exists && st.Type != s.Kind {
		replaceable := st.Type == Symlink || (st.Type == File && s.Kind == Symlink)
		if !replaceable {
			return p, fmt.Errorf("%s is a %s, not a %s; muster does not replace it", s.Path, st.Type, s.Kind)
		}
		// A symlink someone else put there may be what makes the host
		// work (a configuration kept elsewhere); it goes only when the
		// declaration says so, or when it is muster's own.
		if st.Type == Symlink && s.Kind != Symlink && !s.ReplaceSymlink && (owns == nil || !owns(string(Symlink)+":"+s.Path)) {
			return p, fmt.Errorf("%s is a symlink to %q that muster does not own; muster replaces it with a %s only when the resource says replace_symlink = true", s.Path, st.Target, s.Kind)
		}
	}
	same := st.Exists && st.Type == s.Kind
	switch {
	case !st.Exists:
		p.write = true
		p.what = append(p.what, "create")
	case !same:
		p.write = true
		p.clear = s.Kind == Directory
		p.what = append(p.what, fmt.Sprintf("replace %s with %s", st.Type, s.Kind))
	case s.Kind == File && !st.sameContent:
		p.write = true
		p.what = append(p.what, contentChange(it, st))
	case s.Kind == Symlink && st.Target != s.Target:
		p.write = true
		p.what = append(p.what, fmt.Sprintf("target %q → %q", st.Target, s.Target))
	}

	// Mode and owner: declared values, else what is there now (kept
	// across a rewrite), else the defaults for something new.
	p.mode = 0o644
	if s.Kind == Directory {
		p.mode = 0o755
	}
	if same {
		p.mode, p.uid, p.gid = st.Mode, st.UID, st.GID
	}
	if it.mode >= 0 {
		if same && st.Mode != uint32(it.mode) {
			p.chmod = true
			p.what = append(p.what, fmt.Sprintf("mode %s → %s", modeString(st.Mode), modeString(uint32(it.mode))))
		}
		p.mode = uint32(it.mode)
	}
	if it.uid >= 0 {
		if same && st.UID != it.uid {
			p.chown = true
			p.what = append(p.what, fmt.Sprintf("owner %d → %d", st.UID, it.uid))
		}
		p.uid = it.uid
	}
	if it.gid >= 0 {
		if same && st.GID != it.gid {
			p.chown = true
			p.what = append(p.what, fmt.Sprintf("group %d → %d", st.GID, it.gid))
		}
		p.gid = it.gid
	}
	// Set-id and sticky bits are named wherever they are set, so a dry
	// run and a report show them.
	if bits := specialBits(p.mode); bits != "" && s.Kind != Symlink && (p.write || p.chmod) {
		shown := false
		for i, w := range p.what {
			if strings.HasPrefix(w, "mode ") {
				p.what[i] += " (" + bits + ")"
				shown = true
			}
		}
		if !shown {
			p.what = append(p.what, bits+" mode "+modeString(p.mode))
		}
	}
	// A file with other hard links gets a new inode instead of a chmod or
	// chown in place, which would also change the file behind the other
	// links, wherever that is.
	if s.Kind == File && (p.chmod || p.chown) && st.nlink > 1 {
		p.write = true
	}
	return p, nil
}

// contentChange says how a file's content changes: by digest, and for
// content that is not text (which no one reads in a diff) by size too.
func contentChange(it *item, st *State) string {
	if it.spec.Encoding == "" {
		return fmt.Sprintf("content %s → %s", short(st.Digest), short(contentDigest(it.content)))
	}
	have := short(st.Digest)
	if st.Digest == "" {
		have = "?"
	}
	return fmt.Sprintf("content %s (%d bytes) → %s (%d bytes)", have, st.Size, short(contentDigest(it.content)), len(it.content))
}

// past turns a plan's verbs into what a changed line reports.
func past(what []string) []string {
	out := make([]string, len(what))
	for i, w := range what {
		switch w {
		case "create":
			w = "created"
		case "remove":
			w = "removed"
		default:
			if rest, ok := strings.CutPrefix(w, "replace "); ok {
				w = "replaced " + rest
			}
		}
		out[i] = w
	}
	return out
}

// changePaths brings each path of one group to its spec, staging file
// content in one batch that is committed at the end of the group.
func (r *run) changePaths(items []*item) {
	if len(items) == 0 {
		return
	}
	r.batch = &atomicfile.Batch{}
	r.t.made = func(d *os.File) { r.batch.Touch(d) }
	for _, it := range items {
		if r.interrupted(it) {
			continue
		}
		if err := r.settleOwner(it); err != nil {
			it.set().fatal = err
			continue
		}
		if err := r.changePath(it); err != nil {
			it.set().fatal = err
			it.set().what = nil
			it.changed, it.removed, it.created = false, false, false
		}
	}
	// Entries carry their own errors: a rename that failed, or a
	// directory whose sync failed, so the change may not survive a crash.
	r.batch.Commit()
	for _, it := range items {
		if it.entry == nil {
			continue
		}
		if e := it.entry.Err(); e != nil {
			it.set().fatal = e
			it.changed, it.removed, it.created = false, false, false
		}
	}
	for _, it := range items {
		if it.changed || it.removed {
			r.changed[it.spec.Path] = it.seq
		}
	}
	r.t.made = nil
	r.batch = nil
}

func (r *run) changePath(it *item) error {
	// Re-observe when something that can change how paths resolve
	// happened since the first look.
	if it.obs.gen != r.gen {
		it.obs = observed{gen: r.gen}
		d, err := r.t.dir(it.parent, false)
		switch {
		case errors.Is(err, errParentMissing):
		case err != nil:
			it.obs.err = err
		default:
			it.obs.st, it.obs.err = observePath(r.workers.get(0), d, it.base, it.spec.Kind, it.content, nil)
		}
	}
	if it.obs.err != nil {
		return it.obs.err
	}
	st := &it.obs.st
	if len(pathMismatch(it, st)) == 0 {
		return nil
	}
	p, err := planPath(it, st, r.s.Owns)
	if err != nil {
		return err
	}
	d, err := r.t.dir(it.parent, !it.absent)
	if err != nil {
		return err
	}
	r.seq++
	it.seq = r.seq
	it.set().what = past(p.what)
	s := it.spec
	dfd := int(d.Fd())
	switch {
	case p.remove:
		flags := 0
		if s.Kind == Directory {
			flags = unix.AT_REMOVEDIR
		}
		if err := unix.Unlinkat(dfd, it.base, flags); err != nil {
			if err == unix.ENOTEMPTY || err == unix.EEXIST {
				return fmt.Errorf("directory %s is not empty; muster removes only empty directories", s.Path)
			}
			return pathErr("remove", d, it.base, err)
		}
		it.entry = r.batch.Touch(d)
		switch s.Kind {
		case Directory:
			r.gen++
			r.t.reset()
		case Symlink:
			r.moved()
		}
		it.removed = true
		return nil

	case p.write && s.Kind == File:
		if err := r.staging(); err != nil {
			return err
		}
		e, err := r.batch.Add(d, it.base, []byte(it.content), toFileMode(p.mode), p.uid, p.gid)
		if err != nil {
			return err
		}
		if len(s.Validate) > 0 {
			if err := r.validate(it, d, e); err != nil {
				r.batch.Drop(e)
				r.invalid[s.Path] = true
				return err
			}
		}
		it.entry = e

	case p.write && s.Kind == Directory:
		if p.clear {
			if err := unix.Unlinkat(dfd, it.base, 0); err != nil {
				return pathErr("remove", d, it.base, err)
			}
		}
		// Made private first, then given its owner and mode, so it is
		// never reachable with the wrong ones.
		if err := unix.Mkdirat(dfd, it.base, 0o700); err != nil {
			return pathErr("create directory", d, it.base, err)
		}
		it.entry = r.batch.Touch(d)
		r.moved()
		if err := fixInPlace(d, it.base, Directory, true, p); err != nil {
			return err
		}

	case p.write && s.Kind == Symlink:
		if err := r.staging(); err != nil {
			return err
		}
		if err := replaceSymlink(d, it.base, s.Target, p.uid, p.gid); err != nil {
			return err
		}
		it.entry = r.batch.Touch(d)
		r.moved()

	case p.chmod || p.chown:
		if err := fixInPlace(d, it.base, s.Kind, p.chmod, p); err != nil {
			return err
		}
		it.entry = r.batch.Touch(d)
	}
	it.changed = true
	it.created = !st.Exists
	return nil
}

// moved records a change that can alter how later paths resolve (a
// symlink or directory created or replaced): later specs are observed again
// before they are changed.
func (r *run) moved() {
	r.gen++
	r.t.forget()
}

// fixInPlace sets the owner and mode of what is at name without rewriting
// it. It works on an open descriptor (a symlink is lchowned by name), so a
// symlink swapped in meanwhile is not followed.
func fixInPlace(d *os.File, name string, kind Kind, chmod bool, p pathPlan) error {
	if kind == Symlink {
		if err := unix.Fchownat(int(d.Fd()), name, p.uid, p.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return pathErr("chown", d, name, err)
		}
		return nil
	}
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	want := uint32(unix.S_IFREG)
	if kind == Directory {
		flags |= unix.O_DIRECTORY
		want = unix.S_IFDIR
	}
	fd, err := unix.Openat(int(d.Fd()), name, flags, 0)
	if err != nil {
		return pathErr("open", d, name, err)
	}
	defer unix.Close(fd)
	var s unix.Stat_t
	if err := unix.Fstat(fd, &s); err != nil {
		return pathErr("stat", d, name, err)
	}
	if s.Mode&unix.S_IFMT != want {
		return fmt.Errorf("%s changed type while being fixed", path.Join(d.Name(), name))
	}
	if (p.uid >= 0 && int(s.Uid) != p.uid) || (p.gid >= 0 && int(s.Gid) != p.gid) {
		if err := unix.Fchown(fd, p.uid, p.gid); err != nil {
			return pathErr("chown", d, name, err)
		}
		// chown clears set-id bits; put the intended mode back.
		chmod = true
	}
	if chmod {
		if err := unix.Fchmod(fd, p.mode); err != nil {
			return pathErr("chmod", d, name, err)
		}
	}
	return nil
}

// replaceSymlink creates a symlink under a temp name and renames it over
// name, so the path always holds the old link (or file) or the new one.
func replaceSymlink(d *os.File, name, target string, uid, gid int) error {
	dfd := int(d.Fd())
	var tmp string
	var err error
	for range 16 {
		tmp = atomicfile.TempName(name)
		if err = unix.Symlinkat(target, dfd, tmp); err != unix.EEXIST {
			break
		}
	}
	if err != nil {
		return pathErr("create symlink", d, name, err)
	}
	if uid >= 0 || gid >= 0 {
		err = unix.Fchownat(dfd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return pathErr("replace symlink", d, name, err)
	}
	return nil
}

// orphanCheck refuses to remove an orphan that is no longer the kind of
// thing muster created there.
func orphanCheck(it *item, st *State) error {
	if st.Type != it.spec.Kind {
		return fmt.Errorf("%s is now a %s, not the %s muster created; left in place", it.spec.Path, st.Type, it.spec.Kind)
	}
	return nil
}

// removePaths removes orphaned paths, deepest first.
func (r *run) removePaths(items []*item) {
	if r.t == nil {
		return
	}
	b := &atomicfile.Batch{}
	for _, it := range items {
		if it.err != nil || r.interrupted(it) {
			continue
		}
		if it.obs.err != nil {
			it.set().fatal = it.obs.err
			continue
		}
		st := &it.obs.st
		if !st.Exists {
			it.set().note = "already absent"
			continue
		}
		if err := orphanCheck(it, st); err != nil {
			it.set().fatal = err
			continue
		}
		d, err := r.t.dir(it.parent, false)
		if err != nil {
			it.set().fatal = err
			continue
		}
		flags := 0
		if it.spec.Kind == Directory {
			flags = unix.AT_REMOVEDIR
		}
		if err := unix.Unlinkat(int(d.Fd()), it.base, flags); err != nil {
			if err == unix.ENOTEMPTY || err == unix.EEXIST {
				// What is in it is not muster's to remove: the
				// directory stays, owned, until it is empty.
				it.kept = true
				it.set().note = fmt.Sprintf("directory %s is not empty; left in place until it is", it.spec.Path)
			} else {
				it.set().fatal = pathErr("remove", d, it.base, err)
			}
			continue
		}
		it.entry = b.Touch(d)
		if it.spec.Kind == Directory {
			r.t.reset()
		}
		it.removed = true
	}
	b.Commit()
	for _, it := range items {
		if it.entry != nil && it.entry.Err() != nil {
			it.set().fatal, it.removed = it.entry.Err(), false
		}
	}
}

// dirEmpty reports whether directory name in d has no entries.
func dirEmpty(d *os.File, name string) (bool, error) {
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

func pathErr(op string, d *os.File, name string, err error) error {
	return fmt.Errorf("%s %s: %w", op, path.Join(d.Name(), name), err)
}

// parseMode parses an octal mode such as "0644" or "2755".
func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("mode %q is not an octal mode between 0000 and 7777", s)
	}
	return uint32(m), nil
}

// toFileMode converts chmod(2) bits to a FileMode.
func toFileMode(m uint32) fs.FileMode {
	f := fs.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		f |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		f |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		f |= fs.ModeSticky
	}
	return f
}
