package declaration

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// A staged rollout declares a generation for part of the fleet first (a
// wave), then for the rest with a second declare. The waves are named in
// the declaration, [rollout.wave.NAME], each selecting nodes as a role
// does; declare --wave NAME and --only PATTERN choose which part a
// generation is for (see Declaration.Wave).

// wave is one [rollout.wave.NAME] table.
type wave struct {
	name string
	at   place
	// sel holds only the selection, nodes and labels: a wave selects
	// nodes exactly as a role does.
	sel role
}

// rollout reads the [rollout] table.
func (fp *fileParser) rollout(key []string, v any) {
	t, ok := fp.table(key, v, "a table, such as [rollout.wave.canary]")
	if !ok {
		return
	}
	for _, k := range sortedKeys(t) {
		fk := slices.Concat(key, []string{k})
		if k != "wave" {
			fp.errorf(fk, "unknown key (want wave, such as [rollout.wave.canary])")
			continue
		}
		waves, ok := fp.table(fk, t[k], "a table of waves, such as [rollout.wave.canary]")
		if !ok {
			continue
		}
		for _, name := range sortedKeys(waves) {
			fp.wave(name, waves[name])
		}
	}
}

// wave reads one [rollout.wave.NAME] table.
func (fp *fileParser) wave(name string, v any) {
	key := []string{"rollout", "wave", name}
	t, ok := fp.table(key, v, "a table, such as [rollout.wave.canary]")
	if !ok {
		return
	}
	switch {
	case name == "":
		fp.errorf(key, "wave name is empty")
		return
	case hasControl(name) || strings.ContainsAny(name, ", "):
		fp.errorf(key, "wave name %q contains a space, a comma or a control character", name)
		return
	}
	if prev, dup := fp.waves[name]; dup {
		fp.errorf(key, "wave %s is already defined at %s; define each wave in one place", name, prev.at)
		return
	}
	w := &wave{name: name, at: fp.at(key), sel: role{name: name, key: toml.Key(key).String()}}
	selects := false
	for _, k := range sortedKeys(t) {
		fk := slices.Concat(key, []string{k})
		if k != "nodes" && k != "labels" {
			fp.errorf(fk, "unknown key (want nodes or labels); a wave selects nodes, the roles say what they get")
			continue
		}
		selects = true
		fp.selector(fk, t[k], &w.sel)
	}
	if !selects {
		fp.errorf(key, "wave selects no nodes; give nodes = [\"pattern\", ...] or labels = { name = \"value\" }")
		return
	}
	fp.waves[name] = w
}

// Waves lists the names of the declaration's waves, sorted.
func (d *Declaration) Waves() []string {
	names := make([]string, 0, len(d.waves))
	for n := range d.waves {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Wave is the part of the fleet a generation is declared for in a staged
// rollout: the nodes any of the named waves selects, and those whose name
// matches any of the patterns.
type Wave struct {
	waves    []*wave
	patterns []string
}

// Wave returns the part of the fleet that the waves named and the node
// name patterns select. It refuses a wave the declaration does not have
// and a malformed pattern, naming them; with neither it returns nil, the
// whole fleet.
func (d *Declaration) Wave(names, patterns []string) (*Wave, error) {
	if len(names) == 0 && len(patterns) == 0 {
		return nil, nil
	}
	w := &Wave{}
	for _, n := range names {
		wv := d.waves[n]
		if wv == nil {
			if len(d.waves) == 0 {
				return nil, fmt.Errorf("wave %q: the declaration has no waves (define them as [rollout.wave.NAME])", n)
			}
			return nil, fmt.Errorf("wave %q: the declaration has none of that name (it has %s)", n, strings.Join(d.Waves(), ", "))
		}
		if !slices.Contains(w.waves, wv) {
			w.waves = append(w.waves, wv)
		}
	}
	for _, p := range patterns {
		if err := CheckPattern(p); err != nil {
			return nil, err
		}
		if !slices.Contains(w.patterns, p) {
			w.patterns = append(w.patterns, p)
		}
	}
	return w, nil
}

// CheckPattern refuses a node name pattern that is empty or malformed.
// Patterns are shell patterns, as in a role's nodes.
func CheckPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty node pattern")
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("node pattern %q is malformed", p)
	}
	return nil
}

// MatchName reports whether a node name matches pattern p (see
// CheckPattern).
func MatchName(p, name string) bool {
	ok, _ := path.Match(p, name)
	return ok
}

// Selects reports whether node n is in the wave.
func (w *Wave) Selects(n Node) bool {
	for _, wv := range w.waves {
		if wv.sel.selects(n) {
			return true
		}
	}
	for _, p := range w.patterns {
		if MatchName(p, n.Name) {
			return true
		}
	}
	return false
}

// String describes the wave as declare records it in the manifest: the
// waves' names, then the patterns, such as "canary" or "canary, db-0[12]".
func (w *Wave) String() string {
	var parts []string
	for _, wv := range w.waves {
		parts = append(parts, wv.name)
	}
	return strings.Join(append(parts, w.patterns...), ", ")
}
