package resource

// # Users and groups
//
// A user or group is changed through the host's own shadow tools (useradd,
// usermod, userdel, groupadd, groupmod, groupdel), given --root when
// System.Root is not "/", and read back from Root's etc/passwd and
// etc/group, which are the databases those tools write. Groups are made
// before users in an order group (and removed after them), and both come
// before paths (DefaultOrder), so a user's groups exist when it is made and
// a file's owner exists when the file is.
//
// A user is matched on what its spec declares: uid, primary group (by name
// or number), supplementary groups (exactly the declared ones), home and
// shell; a group on its gid. System only steers creation (useradd --system
// and groupadd --system pick an id from the system range, and a system user
// gets no home directory; any other user gets one, made from the skeleton).
// Removing a user leaves its home directory and files in place.
//
// A file or directory whose owner or group is a user or group the same
// declaration makes present has its owner resolved again when its order
// group is about to change, after the accounts were made or changed (a
// changed gid is a changed group owner); if it does not exist then, the
// line fails naming it. An owner that is neither on the host nor declared
// fails the line at once. Either way nothing is made with another owner in
// its place.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/muster-tool/muster/internal/outcome"
)

// accountsDB is what Root's etc/passwd and etc/group hold.
type accountsDB struct {
	users   map[string]passwdEntry
	groups  map[string]groupEntry
	byGID   map[int]string
	members map[string][]string // user -> supplementary groups, sorted
}

type passwdEntry struct {
	uid, gid    int
	home, shell string
}

type groupEntry struct {
	gid     int
	members []string
}

// readDB returns the lines of Root's etc/passwd or etc/group split at
// ":", read through os.Root so that the read stays inside the root.
// Comments, blank lines and lines with fewer than minFields fields are
// skipped.
func readDB(root, db string, minFields int) ([][]string, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := r.ReadFile("etc/" + db)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f := strings.Split(string(line), ":")
		if len(f) < minFields || f[0] == "" {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

func loadAccounts(root string) (*accountsDB, error) {
	db := &accountsDB{users: map[string]passwdEntry{}, groups: map[string]groupEntry{}, byGID: map[int]string{}, members: map[string][]string{}}
	// A database that does not exist yet is empty: useradd and
	// groupadd make it.
	users, err := readDB(root, "passwd", 7)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(root, "etc/passwd"), err)
	}
	for _, f := range users {
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if _, dup := db.users[f[0]]; dup || err1 != nil || err2 != nil {
			continue
		}
		db.users[f[0]] = passwdEntry{uid: uid, gid: gid, home: f[5], shell: f[6]}
	}
	groups, err := readDB(root, "group", 4)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(root, "etc/group"), err)
	}
	for _, f := range groups {
		gid, err := strconv.Atoi(f[2])
		if _, dup := db.groups[f[0]]; dup || err != nil {
			continue
		}
		g := groupEntry{gid: gid}
		if f[3] != "" {
			g.members = strings.Split(f[3], ",")
		}
		db.groups[f[0]] = g
		if _, ok := db.byGID[gid]; !ok {
			db.byGID[gid] = f[0]
		}
		for _, m := range g.members {
			db.members[m] = append(db.members[m], f[0])
		}
	}
	for _, gs := range db.members {
		slices.Sort(gs)
	}
	return db, nil
}

// state is what db holds of the user or group s names.
func (db *accountsDB) state(s *Spec) State {
	var st State
	if s.Kind == Group {
		if g, ok := db.groups[s.Name]; ok {
			st.Exists, st.Type, st.GID = true, Group, g.gid
		}
		return st
	}
	if u, ok := db.users[s.Name]; ok {
		st.Exists, st.Type = true, User
		st.UID, st.GID, st.Home, st.Shell = u.uid, u.gid, u.home, u.shell
		st.Groups = db.members[s.Name]
	}
	return st
}

// gid resolves a group named by name or number.
func (db *accountsDB) gid(group string) (int, bool) {
	if n, err := strconv.Atoi(group); err == nil && n >= 0 {
		return n, true
	}
	g, ok := db.groups[group]
	return g.gid, ok
}

// groupName names a gid for messages: its name where the database has one.
func (db *accountsDB) groupName(gid int) string {
	if n, ok := db.byGID[gid]; ok {
		return fmt.Sprintf("%s (%d)", n, gid)
	}
	return strconv.Itoa(gid)
}

// accountMismatch lists how st differs from the spec; empty means it
// matches.
func accountMismatch(it *item, st *State, db *accountsDB) []string {
	s := it.spec
	switch {
	case it.absent && st.Exists:
		return []string{fmt.Sprintf("%s %s exists, declared absent", s.Kind, s.Name)}
	case it.absent:
		return nil
	case !st.Exists:
		return []string{fmt.Sprintf("%s %s does not exist", s.Kind, s.Name)}
	}
	var d []string
	if s.Kind == Group {
		if s.GID != nil && st.GID != *s.GID {
			d = append(d, fmt.Sprintf("gid %d ≠ declared %d", st.GID, *s.GID))
		}
		return d
	}
	if s.UID != nil && st.UID != *s.UID {
		d = append(d, fmt.Sprintf("uid %d ≠ declared %d", st.UID, *s.UID))
	}
	if s.Group != "" {
		switch gid, ok := db.gid(s.Group); {
		case !ok:
			d = append(d, fmt.Sprintf("primary group %s ≠ declared %s, which does not exist", db.groupName(st.GID), s.Group))
		case gid != st.GID:
			d = append(d, fmt.Sprintf("primary group %s ≠ declared %s", db.groupName(st.GID), idString(s.Group, gid)))
		}
	}
	if s.Groups != nil {
		want := slices.Sorted(slices.Values(s.Groups))
		if !slices.Equal(st.Groups, want) {
			d = append(d, fmt.Sprintf("groups %s ≠ declared %s", listOrNone(st.Groups), strings.Join(want, ",")))
		}
	}
	if s.Home != "" && st.Home != s.Home {
		d = append(d, fmt.Sprintf("home %q ≠ declared %q", st.Home, s.Home))
	}
	if s.Shell != "" && st.Shell != s.Shell {
		d = append(d, fmt.Sprintf("shell %q ≠ declared %q", st.Shell, s.Shell))
	}
	return d
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	return strings.Join(l, ",")
}

// accountPlan is the tool and arguments that bring an account to its
// spec, and what the line says of it.
func accountPlan(it *item, st *State, db *accountsDB) (tool string, args, what []string) {
	s := it.spec
	if it.absent {
		tool = "userdel"
		if s.Kind == Group {
			tool = "groupdel"
		}
		return tool, []string{"--", s.Name}, []string{"remove"}
	}
	if !st.Exists {
		what = []string{"create"}
	}
	if s.Kind == Group {
		tool = "groupmod"
		if !st.Exists {
			tool = "groupadd"
			if s.System {
				args = append(args, "--system")
			}
		}
		if s.GID != nil && (!st.Exists || st.GID != *s.GID) {
			args = append(args, "--gid", strconv.Itoa(*s.GID))
			if st.Exists {
				what = append(what, fmt.Sprintf("gid %d → %d", st.GID, *s.GID))
			}
		}
		return tool, append(args, "--", s.Name), what
	}
	tool = "usermod"
	if !st.Exists {
		tool = "useradd"
		if s.System {
			args = append(args, "--system", "--no-create-home")
		} else {
			args = append(args, "--create-home")
		}
	}
	if s.UID != nil && (!st.Exists || st.UID != *s.UID) {
		args = append(args, "--uid", strconv.Itoa(*s.UID))
		if st.Exists {
			what = append(what, fmt.Sprintf("uid %d → %d", st.UID, *s.UID))
		}
	}
	if s.Group != "" {
		if gid, ok := db.gid(s.Group); !st.Exists || !ok || gid != st.GID {
			args = append(args, "--gid", s.Group)
			if st.Exists {
				what = append(what, fmt.Sprintf("primary group %s → %s", db.groupName(st.GID), s.Group))
			}
		}
	}
	if s.Groups != nil {
		want := slices.Sorted(slices.Values(s.Groups))
		if !st.Exists || !slices.Equal(st.Groups, want) {
			args = append(args, "--groups", strings.Join(want, ","))
			if st.Exists {
				what = append(what, fmt.Sprintf("groups %s → %s", listOrNone(st.Groups), strings.Join(want, ",")))
			}
		}
	}
	for _, f := range []struct{ name, flag, have, want string }{
		{"home", "--home", st.Home, s.Home},
		{"shell", "--shell", st.Shell, s.Shell},
	} {
		if f.want == "" || (st.Exists && f.have == f.want) {
			continue
		}
		flag := f.flag
		if !st.Exists && f.name == "home" {
			flag = "--home-dir" // useradd's spelling; usermod's is --home
		}
		args = append(args, flag, f.want)
		if st.Exists {
			what = append(what, fmt.Sprintf("%s %q → %q", f.name, f.have, f.want))
		}
	}
	return tool, append(args, "--", s.Name), what
}

// changeAccounts brings one order group's groups and users to their specs,
// in the order change sorted them (present groups, present users, absent
// users, absent groups), reading the databases again after every change.
func (r *run) changeAccounts(items []*item) {
	if len(items) == 0 {
		return
	}
	var db *accountsDB
	for _, it := range items {
		if r.interrupted(it) {
			continue
		}
		if db == nil {
			var err error
			if db, err = loadAccounts(r.s.Root); err != nil {
				it.set().fatal = err
				continue
			}
		}
		st := db.state(it.spec)
		if len(accountMismatch(it, &st, db)) == 0 {
			continue
		}
		tool, args, what := accountPlan(it, &st, db)
		r.seq++
		it.seq = r.seq
		db = nil
		// Lookups of owners made before this change may be out of date.
		r.ids = newIDs(r.s.Root, r.live)
		if err := r.runTool(tool, args); err != nil {
			it.set().fatal = err
			continue
		}
		it.set().what = past(what)
		if it.absent {
			it.removed = true
		} else {
			it.changed = true
			it.created = !st.Exists
		}
	}
}

// runTool runs one of the shadow tools on Root. A failure carries the
// tool's exit status and the first lines of what it said.
func (r *run) runTool(tool string, args []string) error {
	path := findTool(tool)
	if !r.live {
		root, err := filepath.Abs(r.s.Root)
		if err != nil {
			return err
		}
		args = append([]string{"--root", root}, args...)
	}
	cmd := exec.CommandContext(r.ctx, path, args...)
	cmd.Dir = "/"
	out := &capped{max: outputKept}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("%s could not run: %w", tool, err)
	}
	var lines []string
	for l := range strings.SplitSeq(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(lines) < 3 {
			lines = append(lines, outcome.Printable(l))
		}
	}
	msg := fmt.Sprintf("%s exited with status %d", tool, ee.ExitCode())
	if len(lines) > 0 {
		msg += ": " + strings.Join(lines, " / ")
	}
	return errors.New(msg)
}

// findTool finds a shadow tool on PATH or in the sbin directories, which a
// timer's PATH may lack.
func findTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return name
}

// observeAccounts reads every user and group spec's state from one read
// of the databases, which it keeps for the mismatches.
func (r *run) observeAccounts() {
	var items []*item
	for _, it := range r.items {
		if (it.spec.Kind == User || it.spec.Kind == Group) && it.err == nil && !it.leave {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return
	}
	db, err := loadAccounts(r.s.Root)
	r.db = db
	for _, it := range items {
		it.obs = observed{err: err}
		if err == nil {
			it.obs.st = db.state(it.spec)
		}
	}
}

// accountDryPlan lists what changeAccounts would do.
func (r *run) accountDryPlan(it *item) ([]string, bool) {
	_, _, what := accountPlan(it, &it.obs.st, r.db)
	return what, it.absent
}

// accountIDs holds the users and groups a run makes present, with their
// order, for owners that do not exist yet (see the doc above).
type accountIDs map[idKey]int

func declaredAccounts(specs []Spec) accountIDs {
	m := accountIDs{}
	for i := range specs {
		s := &specs[i]
		if (s.Kind != User && s.Kind != Group) || s.State == "absent" {
			continue
		}
		db := "passwd"
		if s.Kind == Group {
			db = "group"
		}
		o := s.Order
		if o == 0 {
			o = DefaultOrder(s.Kind)
		}
		m[idKey{db, s.Name}] = o
	}
	return m
}

// settleOwner resolves the owner and group of a path whose user or group
// this run makes or may change, once its order group is about to change.
func (r *run) settleOwner(it *item) error {
	if !it.pendingOwner && !it.resettle {
		return nil
	}
	it.pendingOwner, it.resettle = false, false
	s := it.spec
	if r.ids == nil {
		r.ids = newIDs(r.s.Root, r.live)
	}
	var err error
	if s.Owner != "" {
		if it.uid, err = r.ids.user(s.Owner); err != nil {
			return fmt.Errorf("owner %q does not exist on this host, although this declaration makes it: see the line of user:%s", s.Owner, s.Owner)
		}
	}
	if s.Group != "" {
		if it.gid, err = r.ids.group(s.Group); err != nil {
			return fmt.Errorf("group %q does not exist on this host, although this declaration makes it: see the line of group:%s", s.Group, s.Group)
		}
	}
	return nil
}

// pendingOwnerPlan says, in a dry run, who will own a path whose owner or
// group this run makes first.
func pendingOwnerPlan(s *Spec) string {
	var who []string
	if s.Owner != "" {
		who = append(who, "owner "+s.Owner)
	}
	if s.Group != "" {
		who = append(who, "group "+s.Group)
	}
	return "set " + strings.Join(who, " and ") + " once made"
}
