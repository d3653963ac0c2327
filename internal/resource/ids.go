package resource

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
)

// ids resolves owner and group names to numeric ids: on the live system
// through os/user (which, in muster's static build, reads /etc/passwd and
// /etc/group: no NSS modules), under another root from that
// root's etc/passwd and etc/group, since the image's users are what its files
// must be owned by. Numeric ids are taken as they are. Results are cached for
// the run.
type ids struct {
	root  string
	live  bool
	cache map[idKey]int
	files map[string]map[string]int // "passwd"/"group" -> name -> id
	errs  map[idKey]error
}

// idKey names one lookup: the database ("passwd", "group") and the name.
type idKey struct{ db, name string }

func newIDs(root string, live bool) *ids {
	return &ids{root: root, live: live, cache: map[idKey]int{}, files: map[string]map[string]int{}, errs: map[idKey]error{}}
}

func (x *ids) user(name string) (int, error)  { return x.lookup("passwd", "owner", name) }
func (x *ids) group(name string) (int, error) { return x.lookup("group", "group", name) }

func (x *ids) lookup(db, what, name string) (int, error) {
	if name != "" && name[0] >= '0' && name[0] <= '9' {
		if n, err := strconv.ParseUint(name, 10, 32); err == nil && n != 1<<32-1 {
			return int(n), nil
		}
	}
	key := idKey{db, name}
	if id, ok := x.cache[key]; ok {
		return id, nil
	}
	if err, ok := x.errs[key]; ok {
		return -1, err
	}
	id, err := x.find(db, what, name)
	if err != nil {
		x.errs[key] = err
		return -1, err
	}
	x.cache[key] = id
	return id, nil
}

func (x *ids) find(db, what, name string) (int, error) {
	if x.live {
		var s string
		if db == "passwd" {
			u, err := user.Lookup(name)
			if err != nil {
				return -1, fmt.Errorf("%s %q: %w", what, name, err)
			}
			s = u.Uid
		} else {
			g, err := user.LookupGroup(name)
			if err != nil {
				return -1, fmt.Errorf("%s %q: %w", what, name, err)
			}
			s = g.Gid
		}
		id, err := strconv.Atoi(s)
		if err != nil {
			return -1, fmt.Errorf("%s %q has non-numeric id %q", what, name, s)
		}
		return id, nil
	}
	m, ok := x.files[db]
	if !ok {
		var err error
		if m, err = x.load(db); err != nil {
			return -1, fmt.Errorf("%s %q: %w", what, name, err)
		}
		x.files[db] = m
	}
	id, ok := m[name]
	if !ok {
		return -1, fmt.Errorf("%s %q not found in %s/etc/%s", what, name, x.root, db)
	}
	return id, nil
}

// load reads the names and ids of the root's etc/passwd or etc/group
// (readDB); the first line of a name counts.
func (x *ids) load(db string) (map[string]int, error) {
	lines, err := readDB(x.root, db, 3)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s/etc/%s does not exist", x.root, db)
	}
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, f := range lines {
		id, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		if _, dup := m[f[0]]; !dup {
			m[f[0]] = int(id)
		}
	}
	return m, nil
}
