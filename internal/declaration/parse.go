package declaration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// Declaration is a validated set of declaration files: roles that select
// nodes, per-node sections, and the prune option. It is read-only once
// Parse returns it.
type Declaration struct {
	prune bool
	roles []*role // sorted by name
	nodes map[string]*nodeSection
	// mixedPaths: some path is declared as two types in different roles
	// or node sections, so a node's resources may clash.
	mixedPaths bool
	waves      map[string]*wave   // [rollout.wave.NAME], by name
	vars       map[string]varDecl // the top level's, for templates
	templated  bool               // some file is rendered from a template
}

// Prune reports whether packages muster installed that no declaration
// names any more are to be removed.
func (d *Declaration) Prune() bool { return d.prune }

// declared is one resource as written in one place.
type declared struct {
	spec resource.Spec
	id   string // spec.ID(), computed once
	at   place
	key  string        // the TOML key, for messages
	by   string        // "role web" or "node web-01"
	tmpl *fileTemplate // the file's template; nil if it has none
}

type role struct {
	name   string
	key    string
	at     place
	globs  []string
	labels [][2]string // name, value: a slice is quicker to test than a map
	res    []declared  // sorted by ID
	vars   map[string]varDecl
}

type nodeSection struct {
	name string
	key  string
	at   place
	byID map[string]declared
	res  []declared // sorted by ID, filled once all files are read
	vars map[string]varDecl
}

var kinds = []resource.Kind{resource.File, resource.Directory, resource.Symlink, treeKind, resource.Package, resource.Service, resource.User, resource.Group}

// kindList names the resource types a declaration may use, for messages.
const kindList = "file, directory, symlink, tree, package, service, user or group"

func isKind(s string) bool {
	for _, k := range kinds {
		if string(k) == s {
			return true
		}
	}
	return false
}

// builder gathers all files into one Declaration.
type builder struct {
	problems []Problem
	prune    *bool
	pruneAt  place
	roles    map[string]*role
	nodes    map[string]*nodeSection
	sources  map[string]sourceFile // `source =` files read so far, shared
	trees    map[string]treeSource // tree sources read so far, shared
	waves    map[string]*wave
	vars     map[string]varDecl // the top level's
	// templates parsed so far, by path or inline text; nil for one
	// that failed, with the message in templateErrs.
	templates    map[string]*fileTemplate
	templateErrs map[string]string
	templated    bool
}

type sourceFile struct {
	// content is the file's bytes when they are UTF-8 text (text), else
	// their base64, so that every resource naming the file shares one
	// encoded string.
	content string
	err     string
	text    bool
}

// Parse validates the declaration files and builds the Declaration. It
// reports every problem it finds, sorted by file and line; when any is not
// a warning, the Declaration is nil. Files named by `source =` are read
// here, so a declaration that parses carries all the content it needs.
func Parse(srcs []Source) (*Declaration, []Problem) {
	return parse(srcs)
}

// ParseContext is Parse that returns as soon as ctx ends, with ctx's
// error and no Declaration. Parsing a large declaration is seconds of
// work in the TOML library, which cannot be stopped, so it runs on a
// goroutine of its own that is left to finish; only a command about to
// exit should let it.
func ParseContext(ctx context.Context, srcs []Source) (*Declaration, []Problem, error) {
	type parsed struct {
		d        *Declaration
		problems []Problem
	}
	done := make(chan parsed, 1)
	go func() {
		d, problems := parse(srcs)
		done <- parsed{d, problems}
	}()
	select {
	case p := <-done:
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		return p.d, p.problems, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

func parse(srcs []Source) (*Declaration, []Problem) {
	b := &builder{
		roles:   map[string]*role{},
		nodes:   map[string]*nodeSection{},
		sources: map[string]sourceFile{},
		waves:   map[string]*wave{},
		vars:    map[string]varDecl{},

		templates:    map[string]*fileTemplate{},
		templateErrs: map[string]string{},
	}
	for _, src := range srcs {
		b.file(src)
	}
	d := &Declaration{nodes: b.nodes, waves: b.waves, vars: b.vars, templated: b.templated}
	if b.prune != nil {
		d.prune = *b.prune
	}
	for _, r := range b.roles {
		d.roles = append(d.roles, r)
	}
	sort.Slice(d.roles, func(i, j int) bool { return d.roles[i].name < d.roles[j].name })
	for _, n := range b.nodes {
		n.res = sortedDeclared(n.byID)
		b.clashes(n.res)
	}
	sortProblems(b.problems)
	if HasErrors(b.problems) {
		return nil, b.problems
	}
	d.mixedPaths = d.anyClash()
	return d, b.problems
}

// anyClash reports whether the declaration's path resources, each ID
// once, clash anywhere. When none do, no node's resources can, and
// resolution spares itself the search per node.
func (d *Declaration) anyClash() bool {
	seen := map[string]bool{}
	var specs []resource.Spec
	add := func(res []declared) {
		for i := range res {
			r := &res[i]
			if r.spec.Kind == resource.File || r.spec.Kind == resource.Directory || r.spec.Kind == resource.Symlink {
				if !seen[r.id] {
					seen[r.id] = true
					specs = append(specs, r.spec)
				}
			}
		}
	}
	for _, r := range d.roles {
		add(r.res)
	}
	for _, n := range d.nodes {
		add(n.res)
	}
	return len(resource.Clashes(specs)) > 0
}

func sortedDeclared(m map[string]declared) []declared {
	out := make([]declared, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// fileParser walks one file's TOML tree.
type fileParser struct {
	*builder
	src   Source
	name  string
	lines tomlfile.KeyLines
}

func (b *builder) file(src Source) {
	name := src.Name
	if name == "-" {
		name = StdinName
	}
	var tree map[string]any
	if _, err := tomlfile.DecodeMeta(context.Background(), src.Data, &tree); err != nil {
		p := Problem{File: name, Message: syntaxMessage(err.Error())}
		var pe toml.ParseError
		var ce *tomlfile.CapError
		if errors.As(err, &ce) {
			p.Line, p.Message = ce.Line, ce.Msg
		} else if errors.As(err, &pe) {
			p.Line = pe.Position.Line
			// The library counts a newline that ends a broken line as the
			// next line's; the error's offset says which line it ends.
			if start := pe.Position.Start; start > 0 && start <= len(src.Data) {
				p.Line = 1 + bytes.Count(src.Data[:start], []byte("\n"))
			}
			p.Message = syntaxMessage(pe.Message)
		}
		b.problems = append(b.problems, p)
		return
	}
	fp := &fileParser{builder: b, src: src, name: name, lines: tomlfile.LocateKeys(string(src.Data))}
	for _, k := range sortedKeys(tree) {
		key := []string{k}
		switch v := tree[k]; k {
		case "prune":
			fp.prune(key, v)
		case "vars":
			fp.vars(key, v, "the top level", fp.builder.vars)
		case "role":
			t, ok := fp.table(key, v, "a table of roles, such as [role.web]")
			for _, name := range sortedKeys(t) {
				if ok {
					fp.role(name, t[name])
				}
			}
		case "node":
			t, ok := fp.table(key, v, `a table of nodes, such as [node."web-01"]`)
			for _, name := range sortedKeys(t) {
				if ok {
					fp.node(name, t[name])
				}
			}
		case "rollout":
			fp.rollout(key, v)
		default:
			msg := "unknown key (want prune, vars, role, node or rollout)"
			if isKind(k) {
				msg = fmt.Sprintf("a %s belongs to a role or a node, such as [role.NAME.%s.\"...\"]", k, k)
			}
			fp.errorf(key, "%s", msg)
		}
	}
}

func (fp *fileParser) at(key []string) place {
	return place{file: fp.name, line: fp.lines.Line(key...)}
}

func (fp *fileParser) add(key []string, warning bool, format string, args ...any) {
	fp.problems = append(fp.problems, Problem{
		File:    fp.name,
		Line:    fp.lines.Line(key...),
		Key:     toml.Key(key).String(),
		Message: fmt.Sprintf(format, args...),
		Warning: warning,
	})
}

func (fp *fileParser) errorf(key []string, format string, args ...any) {
	fp.add(key, false, format, args...)
}

func (fp *fileParser) warnf(key []string, format string, args ...any) {
	fp.add(key, true, format, args...)
}

// table returns v as a table, or reports that it should be one.
func (fp *fileParser) table(key []string, v any, want string) (map[string]any, bool) {
	t, ok := v.(map[string]any)
	if !ok {
		fp.errorf(key, "must be %s, not %s", want, tomlfile.TypeName(v))
	}
	return t, ok
}

func (fp *fileParser) prune(key []string, v any) {
	p, ok := v.(bool)
	if !ok {
		fp.errorf(key, "must be true or false, not %s", tomlfile.TypeName(v))
		return
	}
	at := fp.at(key)
	if fp.builder.prune != nil && *fp.builder.prune != p {
		fp.errorf(key, "prune = %t contradicts prune = %t at %s", p, *fp.builder.prune, fp.pruneAt)
		return
	}
	if fp.builder.prune == nil {
		fp.builder.prune, fp.pruneAt = &p, at
	}
}

func (fp *fileParser) role(name string, v any) {
	key := []string{"role", name}
	t, ok := fp.table(key, v, "a table, such as [role.web]")
	if !ok {
		return
	}
	if name == "" {
		fp.errorf(key, "role name is empty")
		return
	}
	if hasControl(name) {
		fp.errorf(key, "role name %q contains a control character", name)
		return
	}
	at := fp.at(key)
	if prev, dup := fp.roles[name]; dup {
		fp.errorf(key, "role %s is already defined at %s; define each role in one place", name, prev.at)
		return
	}
	r := &role{name: name, key: toml.Key(key).String(), at: at, vars: map[string]varDecl{}}
	byID := map[string]declared{}
	selects := false
	for _, k := range sortedKeys(t) {
		fk := slices.Concat(key, []string{k})
		switch v := t[k]; {
		case k == "nodes" || k == "labels":
			selects = true
			fp.selector(fk, v, r)
		case isKind(k):
			fp.resources(resource.Kind(k), fk, v, "role "+name, byID)
		case k == "vars":
			fp.vars(fk, v, "role "+name, r.vars)
		default:
			if _, isTable := v.(map[string]any); isTable {
				fp.errorf(fk, "unknown resource type %q (want %s)", k, kindList)
			} else {
				fp.errorf(fk, "unknown key (want nodes, labels, vars, or a resource type)")
			}
		}
	}
	if !selects {
		fp.errorf(key, "role selects no nodes; give nodes = [\"pattern\", ...] or labels = { name = \"value\" }")
	}
	r.res = sortedDeclared(byID)
	fp.clashes(r.res)
	fp.roles[name] = r
}

func (fp *fileParser) node(name string, v any) {
	key := []string{"node", name}
	t, ok := fp.table(key, v, `a table, such as [node."web-01"]`)
	if !ok {
		return
	}
	if name == "" {
		fp.errorf(key, "node name is empty")
		return
	}
	if hasControl(name) {
		fp.errorf(key, "node name %q contains a control character", name)
		return
	}
	if strings.ContainsAny(name, "*?[") {
		fp.errorf(key, "a node section names one node exactly; select nodes by pattern with a role")
		return
	}
	n := fp.nodes[name]
	if n == nil {
		n = &nodeSection{name: name, key: toml.Key(key).String(), at: fp.at(key), byID: map[string]declared{}, vars: map[string]varDecl{}}
		fp.nodes[name] = n
	}
	for _, k := range sortedKeys(t) {
		fk := slices.Concat(key, []string{k})
		switch {
		case isKind(k):
			fp.resources(resource.Kind(k), fk, t[k], "node "+name, n.byID)
		case k == "vars":
			fp.vars(fk, t[k], "node "+name, n.vars)
		case k == "nodes" || k == "labels":
			fp.errorf(fk, "a node section holds only resources and vars; use a role to select nodes")
		default:
			fp.errorf(fk, "unknown resource type %q (want %s)", k, kindList)
		}
	}
}

// selector reads the nodes or labels key of a role or a wave into r, which
// selects the nodes that match a pattern and carry every label.
func (fp *fileParser) selector(key []string, v any, r *role) {
	if key[len(key)-1] == "labels" {
		lt, ok := fp.table(key, v, `a table of label values, such as { env = "prod" }`)
		if !ok {
			return
		}
		for _, lk := range sortedKeys(lt) {
			s, ok := lt[lk].(string)
			if !ok {
				fp.errorf(slices.Concat(key, []string{lk}), "must be a string, not %s", tomlfile.TypeName(lt[lk]))
				continue
			}
			r.labels = append(r.labels, [2]string{lk, s})
		}
		return
	}
	globs, ok := fp.stringList(key, v)
	if !ok {
		return
	}
	if len(globs) == 0 {
		fp.errorf(key, "is empty; name at least one node or pattern, or leave nodes out and select by labels")
	}
	for _, g := range globs {
		if g == "" {
			fp.errorf(key, "contains an empty pattern")
		} else if _, err := path.Match(g, ""); err != nil {
			fp.errorf(key, "pattern %q is malformed", g)
		} else {
			r.globs = append(r.globs, g)
		}
	}
}

// resources reads one table of resources of one kind into byID, keyed by
// resource ID. Declaring one ID twice is fine when both say the same thing.
func (fp *fileParser) resources(kind resource.Kind, key []string, v any, by string, byID map[string]declared) {
	t, ok := fp.table(key, v, fmt.Sprintf("a table of %s resources, such as %s", kind, exampleHeader(kind)))
	if !ok {
		return
	}
	for _, name := range sortedKeys(t) {
		rk := slices.Concat(key, []string{name})
		rt, ok := fp.table(rk, t[name], "a table of settings")
		if !ok {
			continue
		}
		if kind == treeKind {
			fp.tree(name, rk, rt, by, byID)
			continue
		}
		spec, tmpl, ok := fp.resource(kind, name, rk, rt)
		if !ok {
			continue
		}
		fp.declare(rk, spec, tmpl, by, byID)
	}
}

// declare adds one resource declared at key to byID, with its template if
// it is a file rendered from one.
func (fp *fileParser) declare(key []string, spec resource.Spec, tmpl *fileTemplate, by string, byID map[string]declared) {
	id := spec.ID()
	d := declared{spec: spec, id: id, at: fp.at(key), key: toml.Key(key).String(), by: by, tmpl: tmpl}
	if prev, dup := byID[id]; dup {
		if !sameDeclared(&prev, &d) {
			fp.errorf(key, "%s is also declared for %s at %s with different settings", id, by, prev.at)
		}
		return
	}
	byID[id] = d
}

func exampleHeader(kind resource.Kind) string {
	switch kind {
	case resource.Package:
		return "[role.NAME.package.nginx]"
	case resource.Service:
		return "[role.NAME.service.nginx]"
	case resource.User:
		return "[role.NAME.user.deploy]"
	case resource.Group:
		return "[role.NAME.group.web]"
	}
	return fmt.Sprintf("[role.NAME.%s.\"/etc/example\"]", kind)
}

// settings reads a resource's table, reporting each problem against the
// key at fault.
type settings struct {
	fp  *fileParser
	key []string
	t   map[string]any
	ok  bool
	// reported holds the settings a problem was reported for, so that
	// resource.Check does not report them again.
	reported map[string]bool
}

func (s *settings) errorf(name string, format string, args ...any) {
	k := s.key
	if name != "" {
		k = slices.Concat(s.key, []string{name})
	}
	s.fp.errorf(k, format, args...)
	s.ok = false
	s.reported[name] = true
}

func (s *settings) warnf(name string, format string, args ...any) {
	s.fp.warnf(slices.Concat(s.key, []string{name}), format, args...)
}

func (s *settings) has(name string) bool { _, ok := s.t[name]; return ok }

func (s *settings) str(name string) (string, bool) {
	v, ok := s.t[name]
	if !ok {
		return "", false
	}
	str, isStr := v.(string)
	if !isStr {
		s.errorf(name, "must be a string, not %s", tomlfile.TypeName(v))
		return "", false
	}
	return str, true
}

func (s *settings) boolean(name string) (*bool, bool) {
	v, ok := s.t[name]
	if !ok {
		return nil, false
	}
	b, isBool := v.(bool)
	if !isBool {
		s.errorf(name, "must be true or false, not %s", tomlfile.TypeName(v))
		return nil, false
	}
	return &b, true
}

// only reports keys other than the allowed ones.
func (s *settings) only(kind resource.Kind, allowed ...string) {
	for _, k := range sortedKeys(s.t) {
		found := false
		for _, a := range allowed {
			found = found || a == k
		}
		if !found {
			hint := ""
			if k == "path" || k == "name" {
				hint = "; the table's own name is the " + k
			}
			s.errorf(k, "unknown key for a %s (want %s)%s", kind, strings.Join(allowed, ", "), hint)
		}
	}
}

// resource reads one resource's settings into a Spec, and a file's
// template if it has one (its Spec's content is then rendered per node).
// The rules a Spec must follow are resource.Check's, which a host runs
// too; what is read here is the declaration's own: types, keys, content
// and source.
func (fp *fileParser) resource(kind resource.Kind, name string, key []string, t map[string]any) (resource.Spec, *fileTemplate, bool) {
	s := &settings{fp: fp, key: key, t: t, ok: true, reported: map[string]bool{}}
	spec := resource.Spec{Kind: kind}
	var tmpl *fileTemplate
	switch kind {
	case resource.File:
		s.only(kind, "content", "source", "template", "template_content", "secret", "mode", "special_bits", "owner", "group", "replace_symlink", "validate", "validate_shell", "state", "order")
		spec.Path = name
		spec.State = s.state()
		s.ownership(&spec)
		if secret, ok := s.boolean("secret"); ok {
			spec.Secret = *secret
		}
		content, hasContent := s.str("content")
		source, hasSource := s.str("source")
		tmpl = s.fileTemplate(spec.State == "absent", s.has("content") || s.has("source"))
		switch {
		case spec.State == "absent":
			s.ignoredWhenAbsent(kind, &spec, "content", "source")
		case hasContent && hasSource:
			s.errorf("source", "a file takes content or source, not both")
		case hasSource:
			s.readFileSource(source, &spec)
		case hasContent:
			spec.Content = content
		case s.has("template") || s.has("template_content"):
			// rendered for each node
		case !s.has("content") && !s.has("source"):
			s.errorf("", "a present file needs content, source or a template (content = \"\" for an empty file)")
		}
		if spec.State != "absent" {
			s.validate(&spec)
		}
	case resource.Directory:
		s.only(kind, "mode", "special_bits", "owner", "group", "replace_symlink", "state", "order")
		spec.Path = name
		spec.State = s.state()
		s.ownership(&spec)
		if spec.State == "absent" {
			s.ignoredWhenAbsent(kind, &spec)
		}
	case resource.Symlink:
		s.only(kind, "target", "state", "order")
		spec.Path = name
		spec.State = s.state()
		target, hasTarget := s.str("target")
		switch {
		case spec.State == "absent":
			s.ignoredWhenAbsent(kind, &spec, "target")
		case !hasTarget && !s.has("target"):
			s.errorf("", "a symlink needs a target")
			s.reported["target"] = true
		case hasTarget && target == "":
			s.errorf("target", "is empty")
		default:
			spec.Target = target
		}
	case resource.Package:
		s.only(kind, "version", "order")
		spec.Name = name
		spec.Version = "present"
		if v, ok := s.str("version"); ok {
			if v == "" {
				s.errorf("version", "is empty; give an exact version, \"present\", \"latest\" or \"absent\"")
			} else {
				spec.Version = v
			}
		}
	case resource.Service:
		s.only(kind, "enabled", "running", "restart_on", "order")
		spec.Name = resource.UnitName(name)
		spec.Enabled, _ = s.boolean("enabled")
		spec.Running, _ = s.boolean("running")
		if v, ok := s.t["restart_on"]; ok {
			rk := slices.Concat(key, []string{"restart_on"})
			if paths, ok := fp.stringList(rk, v); ok {
				spec.RestartOn = paths
			} else {
				s.ok = false
			}
		}
	case resource.User, resource.Group:
		s.account(kind, name, &spec)
	}
	if v, ok := s.t["order"]; ok {
		n, isInt := v.(int64)
		if !isInt {
			s.errorf("order", "must be an integer, not %s", tomlfile.TypeName(v))
		} else {
			spec.Order = int(n)
		}
	}
	for _, bad := range resource.Check(&spec) {
		if !s.reported[bad.Field] {
			s.errorf(bad.Field, "%s", bad.Reason)
		}
	}
	if s.ok && len(spec.Mode) == 3 {
		// "644" and "0644" are one mode and must be one setting.
		spec.Mode = "0" + spec.Mode
	}
	return spec, tmpl, s.ok
}

func (s *settings) state() string {
	st, ok := s.str("state")
	if !ok {
		return "present"
	}
	if st != "present" && st != "absent" {
		s.errorf("state", "must be \"present\" or \"absent\", not %q", st)
		return "present"
	}
	return st
}

func (s *settings) ownership(spec *resource.Spec) {
	if v, ok := s.t["mode"]; ok {
		if m, isStr := v.(string); isStr {
			spec.Mode = m
		} else {
			// mode = 644 or 0o644 is the usual slip; say how to write it.
			s.errorf("mode", "must be a string of 3 or 4 octal digits, such as \"0644\", not %s", tomlfile.TypeName(v))
		}
	}
	if b, ok := s.boolean("special_bits"); ok {
		spec.SpecialBits = *b
	}
	if b, ok := s.boolean("replace_symlink"); ok {
		spec.ReplaceSymlink = *b
	}
	for _, k := range []string{"owner", "group"} {
		v, ok := s.str(k)
		switch {
		case !ok:
		case v == "":
			s.errorf(k, "is empty; give a user or group name or number, or leave it out")
		case k == "owner":
			spec.Owner = v
		default:
			spec.Group = v
		}
	}
}

// ignoredWhenAbsent warns about settings that say nothing about an
// absent resource, and leaves them out of the Spec.
func (s *settings) ignoredWhenAbsent(kind resource.Kind, spec *resource.Spec, extra ...string) {
	base := []string{"mode", "special_bits", "owner", "group", "replace_symlink"}
	if kind == resource.File {
		base = append(base, "validate", "validate_shell")
	}
	for _, k := range append(base, extra...) {
		if s.has(k) {
			s.warnf(k, "ignored: the %s is declared absent", kind)
		}
	}
	spec.Mode, spec.Owner, spec.Group, spec.Content, spec.Encoding, spec.Target = "", "", "", "", "", ""
	spec.SpecialBits, spec.ReplaceSymlink = false, false
	spec.Validate, spec.ValidateShell = nil, false
}

// source reads a file named by a declaration, relative to the
// declaration's directory, once however many resources name it (they share
// the one string), reporting a problem against the source key when it
// cannot be read. sourceFile.text says whether it is text; a file's
// `source` may be any bytes (readFileSource).
func (s *settings) source(src string) (sourceFile, bool) {
	if src == "" {
		s.errorf("source", "is empty")
		return sourceFile{}, false
	}
	p := src
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.fp.src.Dir, p)
	}
	sf, seen := s.fp.sources[p]
	if !seen {
		sf = loadSource(p, src)
		s.fp.sources[p] = sf
	}
	if sf.err != "" {
		s.errorf("source", "%s", sf.err)
		return sourceFile{}, false
	}
	return sf, true
}

func loadSource(p, display string) sourceFile {
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sourceFile{err: fmt.Sprintf("source file %q does not exist (relative paths start at the declaration file's directory)", display)}
	case err != nil:
		return sourceFile{err: fmt.Sprintf("cannot read source file %q: %v", display, errors.Unwrap(err))}
	case info.IsDir():
		return sourceFile{err: fmt.Sprintf("source %q is a directory, not a file", display)}
	case info.Size() > resource.MaxContent:
		return sourceFile{err: overCap(display, info.Size())}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return sourceFile{err: fmt.Sprintf("cannot read source file %q: %v", display, errors.Unwrap(err))}
	}
	if len(data) > resource.MaxContent {
		return sourceFile{err: overCap(display, int64(len(data)))}
	}
	var spec resource.Spec
	spec.EncodeContent(data)
	return sourceFile{content: spec.Content, text: spec.Encoding == ""}
}

// stringList reads an array of strings.
func (fp *fileParser) stringList(key []string, v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		fp.errorf(key, "must be an array of strings, not %s", tomlfile.TypeName(v))
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			fp.errorf(key, "element %d must be a string, not %s", i+1, tomlfile.TypeName(e))
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// syntaxMessage words a TOML parser message in muster's style.
func syntaxMessage(msg string) string {
	msg = strings.TrimSuffix(redact(msg), ".")
	if r, n := utf8.DecodeRuneInString(msg); unicode.IsUpper(r) {
		msg = string(unicode.ToLower(r)) + msg[n:]
	}
	return "syntax error: " + msg
}

// redact shortens what a TOML syntax error quotes from the input. A broken
// escape sequence makes the parser quote the string up to that point,
// which may be secret content; the line number says where to look.
func redact(msg string) string {
	if strings.HasPrefix(msg, "Key '") || strings.HasPrefix(msg, "toml: line") && strings.Contains(msg, "Key '") {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c != '"' && c != '\'' {
			b.WriteByte(c)
			continue
		}
		end := -1
		for j := i + 1; j < len(msg); j++ {
			if msg[j] == '\\' && c == '"' {
				j++
				continue
			}
			if msg[j] == c {
				end = j
				break
			}
		}
		switch {
		case end < 0:
			b.WriteByte(c)
			continue
		case utf8.RuneCountInString(msg[i+1:end]) <= 4:
			b.WriteString(msg[i : end+1])
		default:
			b.WriteByte(c)
			b.WriteString("…")
			b.WriteByte(c)
		}
		i = end
	}
	return b.String()
}

// sameSpec reports whether two declarations of one resource agree.
func sameSpec(a, b resource.Spec) bool {
	if a.Kind != b.Kind || a.Path != b.Path || a.Name != b.Name || a.State != b.State ||
		a.Secret != b.Secret || a.Mode != b.Mode || a.SpecialBits != b.SpecialBits ||
		a.Owner != b.Owner || a.Group != b.Group || a.ReplaceSymlink != b.ReplaceSymlink ||
		a.Target != b.Target || a.Version != b.Version || a.Order != b.Order ||
		!sameBool(a.Enabled, b.Enabled) || !sameBool(a.Running, b.Running) ||
		len(a.RestartOn) != len(b.RestartOn) || a.Content != b.Content ||
		a.Encoding != b.Encoding || a.ValidateShell != b.ValidateShell || a.Purge != b.Purge ||
		!sameInt(a.UID, b.UID) || !sameInt(a.GID, b.GID) || a.Home != b.Home || a.Shell != b.Shell ||
		a.System != b.System || !slices.Equal(a.Validate, b.Validate) || !slices.Equal(a.Groups, b.Groups) {
		return false
	}
	for i := range a.RestartOn {
		if a.RestartOn[i] != b.RestartOn[i] {
			return false
		}
	}
	return true
}

func sameInt(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameBool(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func hasControl(s string) bool { return strings.IndexFunc(s, unicode.IsControl) >= 0 }

// clashes reports the resources of one role or node section that cannot
// both be applied (resource.Clashes): one path declared as two types. The
// problem is shown at the later of the two places, naming the other.
func (b *builder) clashes(res []declared) {
	if len(res) < 2 {
		return
	}
	specs := make([]resource.Spec, len(res))
	for i := range res {
		specs[i] = res[i].spec
	}
	for _, c := range resource.Clashes(specs) {
		first, second := inPlaceOrder(res[c.First], res[c.Second])
		b.problems = append(b.problems, Problem{
			File: second.at.file, Line: second.at.line, Key: second.key,
			Message: fmt.Sprintf("%s is declared as a %s here and as a %s at %s; a path has one type", second.spec.Path, second.spec.Kind, first.spec.Kind, first.at),
		})
	}
}

// inPlaceOrder returns a and b, the one declared first (by file, then
// line) first.
func inPlaceOrder(a, b declared) (declared, declared) {
	if b.at.file < a.at.file || (b.at.file == a.at.file && b.at.line < a.at.line) {
		return b, a
	}
	return a, b
}
