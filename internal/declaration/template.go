package declaration

// Templates: a file declared with `template` or `template_content` is
// rendered with Go's text/template once for each node that has it, when
// the generation is declared, never on the host. What a template can use
// is the node's name and labels, the vars the declaration gives the node
// (top level, then its roles, then its node section) and the facts of its
// newest briefing; a key a node lacks is an error, never an empty string.
// Templates get a few helper functions and nothing that reaches the
// machine running declare: no environment, no files, no commands.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// MaxRendered is the most bytes a file rendered from a template may
// have, so that a template looping without end fails instead of filling
// the memory of the machine running declare.
const MaxRendered = 4 << 20

// fileTemplate is one template as declared, parsed once however many
// files and nodes use it.
type fileTemplate struct {
	name string // as the declaration wrote it, or "template_content"
	t    *template.Template
}

// templateData is what a template sees as its dot.
type templateData struct {
	Node   string
	Labels map[string]string
	Vars   map[string]any
	Facts  map[string]any
}

// varDecl is one var as declared in one place.
type varDecl struct {
	value any
	at    place
	key   string // the TOML key, for messages
	by    string // "the top level", "role web" or "node web-01"
}

// templated is a file among a node's resources that is rendered from a
// template: its position in the node's resources and its declaration.
type templated struct {
	pos int
	d   *declared
}

// varConflict is one var two roles of a node declare differently.
type varConflict struct {
	name          string
	first, second varDecl
}

// Rendered is a file rendered from a template for one node: it replaces
// the resource at Pos of the node's Resolved.Resources.
type Rendered struct {
	Pos  int
	Spec resource.Spec
}

// templateFuncs are the helper functions templates may call besides
// text/template's own built-ins (and, or, not, len, index, slice, eq,
// print, printf, ...), none of which reaches outside the template's data.
// muster-declaration(5) documents each.
var templateFuncs = template.FuncMap{
	"join":       joinFunc,
	"default":    defaultFunc,
	"shellquote": shellQuoteFunc,
	"toml":       tomlFunc,
}

// templateName is every template's name inside text/template; messages
// name the template as the declaration does.
const templateName = "t"

// Templated reports whether any file of the declaration is rendered from
// a template.
func (d *Declaration) Templated() bool { return d.templated }

// fileTemplate reads a file resource's template or template_content,
// if it has one. other says whether the file also has content or source;
// absent, whether it is declared absent.
func (s *settings) fileTemplate(absent, other bool) *fileTemplate {
	path, hasPath := s.str("template")
	text, hasText := s.str("template_content")
	switch {
	case !hasPath && !hasText:
		return nil
	case absent:
		for _, k := range []string{"template", "template_content"} {
			if s.has(k) {
				s.warnf(k, "ignored: the file is declared absent")
			}
		}
		return nil
	case hasPath && hasText:
		s.errorf("template_content", "a file takes template or template_content, not both")
		return nil
	case other:
		k := "template"
		if hasText {
			k = "template_content"
		}
		s.errorf(k, "a file takes one of content, source, template and template_content")
		return nil
	case hasText:
		return s.parseTemplate("template_content", "\x00"+text, "template_content", text)
	}
	if path == "" {
		s.errorf("template", "is empty")
		return nil
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.fp.src.Dir, p)
	}
	if t, seen := s.fp.templates[p]; seen {
		if t == nil {
			s.errorf("template", "%s", s.fp.templateErrs[p])
		}
		return t
	}
	data, err := readTemplate(p, path)
	if err != nil {
		s.fp.templates[p], s.fp.templateErrs[p] = nil, err.Error()
		s.errorf("template", "%s", err)
		return nil
	}
	return s.parseTemplate("template", p, path, data)
}

// parseTemplate parses text, the template named name, once for its
// cacheKey (a template file's path, or an inline template's text), so
// that two declarations of one file with one template are the same.
func (s *settings) parseTemplate(key, cacheKey, name, text string) *fileTemplate {
	if t, seen := s.fp.templates[cacheKey]; seen {
		if t == nil {
			s.errorf(key, "%s", s.fp.templateErrs[cacheKey])
		}
		return t
	}
	t, err := template.New(templateName).Option("missingkey=error").Funcs(templateFuncs).Parse(text)
	if err != nil {
		msg := "template " + name + ": " + strings.TrimPrefix(err.Error(), "template: ")
		if m := parseErrorRE().FindStringSubmatch(err.Error()); m != nil {
			msg = fmt.Sprintf("template %s:%s: %s", name, m[1], m[2])
		}
		if secret, _ := s.t["secret"].(bool); secret {
			msg = redact(msg)
		}
		s.fp.templates[cacheKey], s.fp.templateErrs[cacheKey] = nil, msg
		s.errorf(key, "%s", msg)
		return nil
	}
	ft := &fileTemplate{name: name, t: t}
	s.fp.templates[cacheKey] = ft
	s.fp.templated = true
	return ft
}

// parseErrorRE is compiled when a template first fails to parse, not when
// a muster process starts.
var parseErrorRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?s)^template: ` + templateName + `:(\d+): (.*)$`)
})

func readTemplate(p, display string) (string, error) {
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("template file %q does not exist (relative paths start at the declaration file's directory)", display)
	case err != nil:
		return "", fmt.Errorf("cannot read template file %q: %v", display, errors.Unwrap(err))
	case info.IsDir():
		return "", fmt.Errorf("template %q is a directory, not a file", display)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("cannot read template file %q: %v", display, errors.Unwrap(err))
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("template file %q is not UTF-8 text", display)
	}
	return string(data), nil
}

// vars reads a table of vars declared by by into into. A var declared
// twice (the top level and a node's section may span several files) must
// have one value.
func (fp *fileParser) vars(key []string, v any, by string, into map[string]varDecl) {
	t, ok := fp.table(key, v, `a table of vars, such as { port = 8080 }`)
	if !ok {
		return
	}
	for _, name := range sortedKeys(t) {
		vk := slices.Concat(key, []string{name})
		if !fp.varValue(vk, t[name]) {
			continue
		}
		d := varDecl{value: t[name], at: fp.at(vk), key: toml.Key(vk).String(), by: by}
		if prev, dup := into[name]; dup {
			if !reflect.DeepEqual(prev.value, d.value) {
				fp.errorf(vk, "var %s is also declared for %s at %s with another value", name, by, prev.at)
			}
			continue
		}
		into[name] = d
	}
}

// varValue checks that a var's value is one templates can use without
// reaching the machine: a date-time would carry methods that read its
// time zone.
func (fp *fileParser) varValue(key []string, v any) bool {
	switch v := v.(type) {
	case time.Time:
		fp.errorf(key, "a var cannot be a date-time; write it as a string")
		return false
	case []any:
		for _, e := range v {
			if !fp.varValue(key, e) {
				return false
			}
		}
	case []map[string]any:
		for _, e := range v {
			if !fp.varValue(key, e) {
				return false
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if !fp.varValue(slices.Concat(key, []string{k}), v[k]) {
				return false
			}
		}
	}
	return true
}

// sameDeclared reports whether two declarations of one resource agree,
// template included.
func sameDeclared(a, b *declared) bool {
	return a.tmpl == b.tmpl && sameSpec(a.spec, b.spec)
}

// combineTemplates finds the templated files among c's merged resources
// and merges the vars of the top level and of the roles whose bits are
// set: a role's var replaces the top level's, and two roles that declare
// one var differently conflict, the first role (by name) winning.
func (d *Declaration) combineTemplates(c *combination, bits []byte) {
	for i := range c.merged {
		if c.merged[i].tmpl != nil {
			c.templates = append(c.templates, templated{pos: i, d: &c.merged[i]})
		}
	}
	// The vars are needed too when only a node section has templates.
	by := make(map[string]varDecl, len(d.vars))
	fromRole := map[string]bool{}
	for name, v := range d.vars {
		by[name] = v
	}
	for i, r := range d.roles {
		if bits[i/8]&(1<<(i%8)) == 0 {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(r.vars)) {
			v := r.vars[name]
			if prev := by[name]; fromRole[name] {
				if !reflect.DeepEqual(prev.value, v.value) {
					c.varConflicts = append(c.varConflicts, varConflict{name: name, first: prev, second: v})
				}
				continue
			}
			by[name], fromRole[name] = v, true
		}
	}
	c.vars = make(map[string]any, len(by))
	for name, v := range by {
		c.vars[name] = v.value
	}
}

// ownTemplates lists, into out, the templated files of a node with a
// section of its own: c's merged with sec's as override merges them, by
// position in the merged list.
func ownTemplates(out []templated, c *combination, sec *nodeSection) []templated {
	i, o, ti := 0, 0, 0 // in c's resources, in the merged list, in c.templates
	for j := range sec.res {
		n := &sec.res[j]
		k := i + sort.SearchStrings(c.ids[i:], n.id)
		for ; ti < len(c.templates) && c.templates[ti].pos < k; ti++ {
			out = append(out, templated{pos: o + c.templates[ti].pos - i, d: c.templates[ti].d})
		}
		o += k - i
		if n.tmpl != nil {
			out = append(out, templated{pos: o, d: n})
		}
		o++
		i = k
		if k < len(c.ids) && c.ids[k] == n.id {
			i++
			if ti < len(c.templates) && c.templates[ti].pos == k {
				ti++ // replaced by the node's own
			}
		}
	}
	for ; ti < len(c.templates); ti++ {
		out = append(out, templated{pos: o + c.templates[ti].pos - i, d: c.templates[ti].d})
	}
	return out
}

// ownVars is c's vars with sec's over them, and the conflicts sec does
// not settle.
func ownVars(c *combination, sec *nodeSection) (map[string]any, []varConflict) {
	if len(sec.vars) == 0 {
		return c.vars, c.varConflicts
	}
	vars := make(map[string]any, len(c.vars)+len(sec.vars))
	for k, v := range c.vars {
		vars[k] = v
	}
	for k, v := range sec.vars {
		vars[k] = v.value
	}
	var conflicts []varConflict
	for _, cf := range c.varConflicts {
		if _, settled := sec.vars[cf.name]; !settled {
			conflicts = append(conflicts, cf)
		}
	}
	return vars, conflicts
}

// Renderer renders the templated files of resolved nodes and collects
// what went wrong, so that every node's problems are shown together. The
// same problem for many nodes is one problem naming the first node and
// how many more.
type Renderer struct {
	problems map[renderKey]*renderProblem
	seq      []*renderProblem
	out      cappedBuffer
	data     templateData
}

// renderKey is one problem, apart from the nodes it is for: its message
// is before, the nodes, then after.
type renderKey struct {
	at            place
	key           string
	before, after string
}

type renderProblem struct {
	renderKey
	node  string
	count int
}

// NewRenderer returns a Renderer with no problems yet.
func NewRenderer() *Renderer {
	return &Renderer{problems: map[renderKey]*renderProblem{}, out: cappedBuffer{max: MaxRendered}}
}

// Render renders the templated files of r for its node. It reports false
// when any failed (Problems says why), and then returns nothing.
func (rr *Renderer) Render(r Resolved) ([]Rendered, bool) {
	if len(r.templates) == 0 {
		return nil, true
	}
	ok := true
	for _, cf := range r.varConflicts {
		ok = false
		rr.add(renderKey{at: cf.second.at, key: cf.second.key,
			before: "",
			after:  fmt.Sprintf(": var %s is declared differently by %s here and by %s at %s", cf.name, cf.second.by, cf.first.by, cf.first.at),
		}, r.Node)
	}
	rr.data = templateData{Node: r.Node, Labels: r.labels, Vars: r.vars, Facts: r.facts}
	out := make([]Rendered, 0, len(r.templates))
	for _, t := range r.templates {
		rr.out.buf.Reset()
		err := t.d.tmpl.t.Execute(&rr.out, &rr.data)
		if err != nil {
			ok = false
			rr.add(rr.explain(r, t.d, err), r.Node)
			continue
		}
		if !utf8.Valid(rr.out.buf.Bytes()) {
			// slice can cut a character in two; file content travels as
			// text.
			ok = false
			rr.add(renderKey{at: t.d.at, key: t.d.key, before: fmt.Sprintf("template %s: rendered for ", t.d.tmpl.name), after: ", it is not UTF-8 text"}, r.Node)
			continue
		}
		spec := r.Resources[t.pos]
		spec.Content = rr.out.buf.String()
		out = append(out, Rendered{Pos: t.pos, Spec: spec})
	}
	if !ok {
		return nil, false
	}
	return out, true
}

func (rr *Renderer) add(k renderKey, node string) {
	p := rr.problems[k]
	if p == nil {
		p = &renderProblem{renderKey: k, node: node}
		rr.problems[k] = p
		rr.seq = append(rr.seq, p)
	}
	p.count++
}

// Problems returns what went wrong rendering, sorted by file and line.
func (rr *Renderer) Problems() []Problem {
	out := make([]Problem, 0, len(rr.seq))
	for _, p := range rr.seq {
		out = append(out, Problem{File: p.at.file, Line: p.at.line, Key: p.key,
			Message: p.before + nodesWho(p.node, p.count) + p.after})
	}
	sortProblems(out)
	return out
}

// execErrorRE splits text/template's execution error: line, the action
// that failed, and why. Its format has been text/template's since Go 1;
// should it change, the message is shown as text/template gives it. Both
// patterns are compiled when a template first fails, not when a muster
// process starts.
var (
	execErrorRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?s)^template: ` + templateName + `:(\d+):\d+: executing "(?:[^"\\]|\\.)*" at <(.*?)>: (.*)$`)
	})
	missingKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^map has no entry for key (".*")$`) })
)

// explain turns a failed render into a problem: where in the template,
// for which node, and why, never quoting content.
func (rr *Renderer) explain(r Resolved, d *declared, err error) renderKey {
	k := renderKey{at: d.at, key: d.key}
	name := d.tmpl.name
	var tooLarge *renderTooLarge
	if errors.As(err, &tooLarge) {
		k.before = fmt.Sprintf("template %s: rendered for ", name)
		k.after = fmt.Sprintf(", it is larger than %d bytes (the cap on a rendered file)", MaxRendered)
		return k
	}
	m := execErrorRE().FindStringSubmatch(err.Error())
	if m == nil {
		k.before = fmt.Sprintf("template %s: for ", name)
		k.after = ": " + strings.TrimPrefix(err.Error(), "template: ")
		if d.spec.Secret {
			k.after = ": it failed (why is not shown: the file is secret)"
		}
		return k
	}
	line, action, why := m[1], m[2], m[3]
	k.before = fmt.Sprintf("template %s:%s: ", name, line)
	if mk := missingKeyRE().FindStringSubmatch(why); mk != nil {
		key, _ := strconv.Unquote(mk[1])
		k.before, k.after = k.before+missingKey(r, action, key)+" for ", missingWhy(r, action)
		return k
	}
	k.before += "for "
	if d.spec.Secret {
		// text/template's reasons quote the template, which is secret
		// like what it renders.
		k.after = ": it failed (why is not shown: the file is secret)"
	} else {
		k.after = fmt.Sprintf(": %s: %s", action, why)
	}
	return k
}

// dataMaps are the maps of templateData, as an action names them.
var dataMaps = []struct{ prefix, noun string }{
	{".Facts.", "fact"}, {".Vars.", "var"}, {".Labels.", "label"},
}

// missingKey says which key is missing: `no fact "memory_mb"`, or for a
// map the action reached some other way, `no key "x"`.
func missingKey(r Resolved, action, key string) string {
	a := strings.TrimPrefix(action, "$")
	for _, dm := range dataMaps {
		if path, ok := strings.CutPrefix(a, dm.prefix); ok {
			name := key
			if strings.HasSuffix(path, "."+key) && !strings.ContainsAny(path, " ()|") {
				name = path // a key of a table var, such as db.host
			}
			return fmt.Sprintf("no %s %q", dm.noun, name)
		}
	}
	return fmt.Sprintf("no key %q", key)
}

// missingWhy explains a missing fact or label by what the node has.
func missingWhy(r Resolved, action string) string {
	a := strings.TrimPrefix(action, "$")
	switch {
	case strings.HasPrefix(a, ".Facts."):
		switch {
		case r.facts == nil && r.factsFrom == "":
			return " (it has sent no briefing)"
		case r.facts == nil:
			return fmt.Sprintf(" (its newest briefing is from muster %s)", r.factsFrom)
		}
		return fmt.Sprintf(" (its newest briefing has %s)", strings.Join(slices.Sorted(maps.Keys(r.facts)), ", "))
	case strings.HasPrefix(a, ".Labels."):
		if len(r.labels) == 0 {
			return " (it has no labels)"
		}
		return fmt.Sprintf(" (its labels are %s)", strings.Join(slices.Sorted(maps.Keys(r.labels)), ", "))
	}
	return ""
}

// cappedBuffer is where a template renders: it refuses to grow past max.
type cappedBuffer struct {
	buf bytes.Buffer
	max int
}

type renderTooLarge struct{}

func (*renderTooLarge) Error() string { return "rendered file too large" }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		return 0, &renderTooLarge{}
	}
	return b.buf.Write(p)
}

// joinFunc is join SEP LIST: the list's elements, each as it is printed,
// with SEP between them.
func joinFunc(sep string, list any) (string, error) {
	v := reflect.ValueOf(list)
	if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
		return "", fmt.Errorf("join wants a list, not %s", kindName(list))
	}
	parts := make([]string, v.Len())
	for i := range parts {
		e := v.Index(i).Interface()
		if !scalar(e) {
			return "", fmt.Errorf("element %d of the list is %s, not a string, number or boolean", i+1, kindName(e))
		}
		parts[i] = fmt.Sprint(e)
	}
	return strings.Join(parts, sep), nil
}

// defaultFunc is default FALLBACK VALUE: VALUE, unless it is nothing (as
// index gives for a key a map does not have) or empty (an empty string,
// list or table); then FALLBACK. Numbers and booleans are never empty.
func defaultFunc(fallback, value any) any {
	v := reflect.ValueOf(value)
	switch {
	case !v.IsValid():
		return fallback
	case v.Kind() == reflect.String || v.Kind() == reflect.Slice || v.Kind() == reflect.Map:
		if v.Len() == 0 {
			return fallback
		}
	}
	return value
}

// shellQuoteFunc is shellquote VALUE: VALUE as one word of a POSIX shell,
// in single quotes; a list becomes its elements so quoted, separated by
// spaces.
func shellQuoteFunc(value any) (string, error) {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	if scalar(value) {
		return quote(fmt.Sprint(value)), nil
	}
	v := reflect.ValueOf(value)
	if v.Kind() != reflect.Slice {
		return "", fmt.Errorf("shellquote wants a string, number, boolean or list, not %s", kindName(value))
	}
	words := make([]string, v.Len())
	for i := range words {
		e := v.Index(i).Interface()
		if !scalar(e) {
			return "", fmt.Errorf("element %d of the list is %s, not a string, number or boolean", i+1, kindName(e))
		}
		words[i] = quote(fmt.Sprint(e))
	}
	return strings.Join(words, " "), nil
}

// tomlFunc is toml VALUE: VALUE written as a TOML value: a string quoted
// and escaped, a number or boolean as it is, a list as an array.
func tomlFunc(value any) (string, error) {
	b, err := appendTOML(nil, value)
	return string(b), err
}

func appendTOML(b []byte, value any) ([]byte, error) {
	switch v := value.(type) {
	case string:
		return tomlfile.AppendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		switch {
		case s == "+Inf":
			s = "inf"
		case s == "-Inf":
			s = "-inf"
		case s == "NaN":
			s = "nan"
		case !strings.ContainsAny(s, ".e"):
			s += ".0"
		}
		return append(b, s...), nil
	}
	rv := reflect.ValueOf(value)
	if rv.Kind() != reflect.Slice {
		return b, fmt.Errorf("toml wants a string, number, boolean or list, not %s", kindName(value))
	}
	b = append(b, '[')
	for i := range rv.Len() {
		if i > 0 {
			b = append(b, ", "...)
		}
		var err error
		if b, err = appendTOML(b, rv.Index(i).Interface()); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

func scalar(v any) bool {
	switch v.(type) {
	case string, bool, int, int64, float64:
		return true
	}
	return false
}

// kindName names a value's type for a template's error, never its value.
func kindName(v any) string {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Invalid:
		return "nothing"
	case reflect.Map:
		return "a table"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Int, reflect.Int64:
		return "an integer"
	}
	return tomlfile.TypeName(v)
}
