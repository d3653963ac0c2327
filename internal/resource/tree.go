package resource

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/muster-tool/muster/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// tree reaches directories inside the apply root without following any
// symlink the declaration did not declare. Every step is an openat(2) of one
// name with O_NOFOLLOW from an already open directory, starting at an open
// handle on the root, so a symlink planted anywhere on the way (or swapped in
// while we walk) is seen, never followed. A declared symlink is followed only
// when its target on disk is the declared one, and then resolved inside the
// root: an absolute target counts from the root, and a target that climbs
// above the root is refused. The result is a set of open directory handles,
// cached for the run, on which files are read and replaced by name.
type tree struct {
	display string // the root as named by the caller, for messages
	root    *os.File
	links   map[string]string // declared present symlinks: path -> target

	real    map[string]*os.File // resolved directory path -> handle
	logical map[string]walked   // directory as declared -> result
	retired []*os.File
	// made is called with the parent of each directory the walk creates.
	made func(parent *os.File)
}

type walked struct {
	f   *os.File
	err error
}

// errParentMissing marks a path whose parent directory does not exist: the
// resource is absent.
var errParentMissing = errors.New("parent missing")

// linkPendingError marks a declared symlink on the way whose target on disk
// is not (yet) the declared one. The walk does not follow it: in the change
// phase the symlink is fixed first (it is shallower) and the walk retried.
type linkPendingError struct{ path, have, want string }

func (e *linkPendingError) Error() string {
	return fmt.Sprintf("parent %s is a symlink to %q, declared %q", e.path, e.have, e.want)
}

func openTree(root string, links map[string]string) (*tree, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", root, err)
	}
	f := os.NewFile(uintptr(fd), "/")
	return &tree{
		display: root,
		root:    f,
		links:   links,
		real:    map[string]*os.File{"/": f},
		logical: map[string]walked{},
	}, nil
}

func (t *tree) close() {
	for _, f := range t.real {
		f.Close()
	}
	for _, f := range t.retired {
		f.Close()
	}
	t.real, t.retired = nil, nil
}

// forget drops cached walks after a change that can alter how paths
// resolve (a symlink or directory created, retargeted or removed). Handles
// stay open until close: a batch may still hold them.
func (t *tree) forget() { clear(t.logical) }

// reset forgets every handle but the root's, after a directory was
// removed: it may have been reached under another name (through a declared
// symlink), and no later walk may create anything in it.
func (t *tree) reset() {
	for p, f := range t.real {
		if p != "/" {
			t.retired = append(t.retired, f)
			delete(t.real, p)
		}
	}
	t.forget()
}

// dir returns an open handle on directory p (absolute, clean, as declared).
// With create, missing directories are made with mode 0755.
func (t *tree) dir(p string, create bool) (*os.File, error) {
	if w, ok := t.logical[p]; ok && (w.err == nil || !create || !errors.Is(w.err, errParentMissing)) {
		return w.f, w.err
	}
	f, err := t.walk(p, create)
	t.logical[p] = walked{f, err}
	return f, err
}

func (t *tree) walk(p string, create bool) (*os.File, error) {
	cur, f := "/", t.root
	rest := strings.TrimPrefix(p, "/")
	hops := 0
	for rest != "" {
		c, r, _ := strings.Cut(rest, "/")
		next := path.Join(cur, c)
		if d, ok := t.real[next]; ok {
			cur, f, rest = next, d, r
			continue
		}
		fd, err := openDirAt(f, c)
		if err == unix.ENOENT && create {
			err = unix.Mkdirat(int(f.Fd()), c, 0o755)
			if err != nil && err != unix.EEXIST {
				return nil, fmt.Errorf("create directory %s: %w", next, err)
			}
			if err == nil && t.made != nil {
				t.made(f)
			}
			fd, err = openDirAt(f, c)
		}
		switch err {
		case nil:
			d := os.NewFile(uintptr(fd), next)
			t.real[next] = d
			cur, f, rest = next, d, r
			continue
		case unix.ENOENT:
			return nil, errParentMissing
		case unix.ELOOP, unix.ENOTDIR:
		default:
			return nil, fmt.Errorf("open directory %s: %w", next, err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(f.Fd()), c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, fmt.Errorf("lstat %s: %w", next, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return nil, fmt.Errorf("parent %s is not a directory", next)
		}
		target, err := readlinkAt(f, c)
		if err != nil {
			return nil, fmt.Errorf("readlink %s: %w", next, err)
		}
		want, declared := t.links[next]
		if !declared {
			return nil, fmt.Errorf("parent %s is a symlink to %q that no declaration names; muster does not follow undeclared symlinks (declare the symlink, or use the path it points to)", next, target)
		}
		if target != want {
			return nil, &linkPendingError{next, target, want}
		}
		if hops++; hops > 40 {
			return nil, fmt.Errorf("too many symlinks on the way to %s", p)
		}
		resolved, ok := resolveIn(cur, target)
		if !ok {
			return nil, fmt.Errorf("parent %s is a symlink to %q, which leaves the root", next, target)
		}
		// Start again from the root along the resolved path, so that
		// every component of it is checked the same way.
		cur, f = "/", t.root
		rest = strings.TrimPrefix(path.Join(resolved, r), "/")
	}
	return f, nil
}

func openDirAt(d *os.File, name string) (int, error) {
	for {
		fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// resolveIn resolves a symlink target found in directory dir, counting an
// absolute target from the root. ok is false when the target climbs above
// the root.
func resolveIn(dir, target string) (string, bool) {
	p := target
	if !path.IsAbs(target) {
		p = dir + "/" + target
	}
	var parts []string
	for c := range strings.SplitSeq(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return "", false
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, c)
		}
	}
	return "/" + strings.Join(parts, "/"), true
}

func readlinkAt(d *os.File, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(int(d.Fd()), name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// checkPath validates a declared path: absolute, clean, not the root
// itself. A ".." anywhere is refused here, so no path can climb out.
func checkPath(p string) error {
	if why := pathReason(p); why != "" {
		return fmt.Errorf("path %q %s", p, why)
	}
	return nil
}

// split returns the parent directory and base name of a checked path.
func split(p string) (string, string) {
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// sweepTemps removes, from the directory of each declared file and symlink,
// the temp files muster stages beside it (atomicfile.TempName) that a
// killed run left. Only regular files and symlinks with exactly that name
// are removed, and only in directories reached as every path is (no
// symlink followed that the declaration does not declare).
func (r *run) sweepTemps() {
	if r.t == nil {
		return
	}
	byDir := map[*os.File][]string{}
	for _, it := range r.items {
		if it.err != nil || it.leave || (it.spec.Kind != File && it.spec.Kind != Symlink) {
			continue
		}
		d, err := r.t.dir(it.parent, false)
		if err != nil {
			continue
		}
		byDir[d] = append(byDir[d], it.base)
	}
	for d, bases := range byDir {
		// Listed through a handle of its own, so d's offset is left alone.
		fd, err := unix.Openat(int(d.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		f := os.NewFile(uintptr(fd), d.Name())
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			if !atomicfile.IsTemp(n) || !slices.ContainsFunc(bases, func(b string) bool { return atomicfile.IsTempOf(n, b) }) {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			if t := st.Mode & unix.S_IFMT; t == unix.S_IFREG || t == unix.S_IFLNK {
				unix.Unlinkat(int(d.Fd()), n, 0)
			}
		}
	}
}
