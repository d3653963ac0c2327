package resource

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// The rules every spec must follow live here, once. declare runs Check and
// Clashes on what it is about to commit and reports each problem at its
// file:line; a host runs Validate on the declaration it fetched before it
// changes anything, so a declaration that declare would refuse (made by a
// bug, by another version of muster or by a compromised pipeline) is
// refused whole, never applied line by line. System.Apply holds each line
// to the same rules.

// Invalid is one thing wrong with a spec on its own.
type Invalid struct {
	// Field is the setting at fault, named as in a declaration ("mode",
	// "target", "restart_on"); "" for the path or name that identifies
	// the resource.
	Field string
	// Reason says what is wrong, quoting values with %q so that no
	// control character reaches a terminal or a log.
	Reason string
}

func (v Invalid) Error() string {
	if v.Field == "" {
		return v.Reason
	}
	return v.Field + ": " + v.Reason
}

// Clash is two specs of one list that cannot both be applied: one
// resource declared twice, or one path declared as two types.
type Clash struct {
	First, Second int // indexes into the list, First < Second
}

// InvalidError is Validate's verdict on a list: the spec at Index is
// wrong, alone or (Other ≥ 0) together with the spec at Other.
type InvalidError struct {
	Index, Other int
	msg          string
}

func (e *InvalidError) Error() string { return e.msg }

// Validate checks specs as a host must before it changes anything: every
// spec on its own (Check) and the list as a whole (Clashes). It returns
// nil, or an *InvalidError naming the first entry at fault by its place
// in the list and its ID.
func Validate(specs []Spec) error {
	for i := range specs {
		if bad := Check(&specs[i]); len(bad) > 0 {
			return &InvalidError{Index: i, Other: -1,
				msg: fmt.Sprintf("resource %d of %d, %s: %s", i+1, len(specs), ShownID(&specs[i]), bad[0])}
		}
	}
	if cs := Clashes(specs); len(cs) > 0 {
		c := cs[0]
		a, b := &specs[c.First], &specs[c.Second]
		return &InvalidError{Index: c.Second, Other: c.First,
			msg: fmt.Sprintf("resources %d and %d of %d, %s and %s: %s", c.First+1, c.Second+1, len(specs), ShownID(a), ShownID(b), ClashReason(a, b))}
	}
	return nil
}

// ShownID is s.ID() as it may be shown: quoted when it holds anything
// that is not printable.
func ShownID(s *Spec) string {
	id := s.ID()
	if strings.IndexFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 || !utf8.ValidString(id) {
		return strconv.Quote(id)
	}
	return id
}

// Clashes finds the pairs of specs in a list that cannot both be applied:
// two with one ID, or two of different types at one path. Each later spec
// is paired with the first that it clashes with.
func Clashes(specs []Spec) []Clash {
	var out []Clash
	// One path is one resource whatever its declared type: a path is its
	// own key, made without a copy, as every declared path passes here
	// twice a run.
	type clashKey struct {
		path bool
		s    string
	}
	first := make(map[clashKey]int, len(specs))
	for i := range specs {
		s := &specs[i]
		key := clashKey{path: true, s: s.Path}
		if !isPath(s.Kind) {
			key = clashKey{s: s.ID()}
		}
		if j, dup := first[key]; dup {
			out = append(out, Clash{First: j, Second: i})
			continue
		}
		first[key] = i
	}
	return out
}

// ClashReason says why two clashing specs cannot both be applied.
func ClashReason(a, b *Spec) string {
	if a.Kind != b.Kind {
		return fmt.Sprintf("path %q is declared as a %s and as a %s; a path has one type", a.Path, a.Kind, b.Kind)
	}
	return fmt.Sprintf("%s is declared twice", ShownID(a))
}

// The patterns are compiled on first use, not in every muster process's
// start-up: most runs check no package, and some no mode.
var (
	modeRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-7]{3,4}$`) })
	packageRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+.:~_-]*$`) })
	versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+.:~_-]*$`) })
)

// UnitTypes are systemd's unit suffixes; a unit name ends in one.
var UnitTypes = []string{".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target", ".path", ".timer", ".slice", ".scope"}

// UnitName is the unit a declaration names: "nginx" and "nginx.service"
// are one unit. A name Check would refuse is returned as it is.
func UnitName(name string) string {
	if unitReason(name) != "" {
		return name
	}
	for _, t := range UnitTypes {
		if strings.HasSuffix(name, t) {
			return name
		}
	}
	return name + ".service"
}

// Check returns what is wrong with s on its own, in a fixed order; nil
// when nothing is.
func Check(s *Spec) []Invalid {
	var bad []Invalid
	add := func(field, format string, args ...any) {
		bad = append(bad, Invalid{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	pathKind := isPath(s.Kind)
	switch s.Kind {
	case File, Directory, Symlink:
		if why := pathReason(s.Path); why != "" {
			add("", "path %q %s", s.Path, why)
		}
		switch s.State {
		case "", "present", "absent":
		default:
			add("state", "must be \"present\" or \"absent\", not %q", s.State)
		}
	case Package:
		if !packageRE().MatchString(s.Name) {
			add("", "%q is not a package name (letters, digits and + . : ~ _ -, starting with a letter or digit)", s.Name)
		}
		switch v := s.Version; {
		case v == "":
		case !versionRE().MatchString(v):
			add("version", "%q is not a version (an exact version, \"present\", \"latest\" or \"absent\")", v)
		}
	case Service:
		if why := unitReason(s.Name); why != "" {
			add("", "%q is not a systemd unit name: %s", s.Name, why)
		}
		for _, p := range s.RestartOn {
			if why := pathReason(p); why != "" {
				add("restart_on", "entry %q %s", p, why)
			}
		}
	case User, Group:
		if why := accountReason(s.Name); why != "" {
			add("", "%q is not a %s name: %s", s.Name, s.Kind, why)
		}
		switch s.State {
		case "", "present", "absent":
		default:
			add("state", "must be \"present\" or \"absent\", not %q", s.State)
		}
	default:
		add("", "unknown resource type %q (want %s)", s.Kind, KindList)
		return bad
	}

	// Settings that do not belong to the kind: declare never makes them,
	// so one is a sign the declaration was made some other way.
	owned := s.Kind == File || s.Kind == Directory
	account := s.Kind == User || s.Kind == Group
	for _, f := range []struct {
		name    string
		set     bool
		applies bool
	}{
		{"path", s.Path != "", pathKind},
		{"name", s.Name != "", !pathKind},
		{"state", s.State != "", pathKind || account},
		{"content", s.Content != "", s.Kind == File},
		{"encoding", s.Encoding != "", s.Kind == File},
		{"secret", s.Secret, s.Kind == File},
		{"validate", len(s.Validate) > 0, s.Kind == File},
		{"validate_shell", s.ValidateShell, s.Kind == File},
		{"purge", s.Purge, s.Kind == Directory},
		{"replace_symlink", s.ReplaceSymlink, owned},
		{"mode", s.Mode != "", owned},
		{"special_bits", s.SpecialBits, owned},
		{"owner", s.Owner != "", owned},
		{"group", s.Group != "", owned || s.Kind == User},
		{"target", s.Target != "", s.Kind == Symlink},
		{"version", s.Version != "", s.Kind == Package},
		{"enabled", s.Enabled != nil, s.Kind == Service},
		{"running", s.Running != nil, s.Kind == Service},
		{"restart_on", len(s.RestartOn) > 0, s.Kind == Service},
		{"uid", s.UID != nil, s.Kind == User},
		{"gid", s.GID != nil, s.Kind == Group},
		{"groups", s.Groups != nil, s.Kind == User},
		{"home", s.Home != "", s.Kind == User},
		{"shell", s.Shell != "", s.Kind == User},
		{"system", s.System, account},
	} {
		if f.set && !f.applies {
			add(f.name, "does not apply to a %s", s.Kind)
		}
	}

	if owned && s.Mode != "" {
		if !modeRE().MatchString(s.Mode) {
			add("mode", "%q is not a mode; give 3 or 4 octal digits, such as \"0644\"", s.Mode)
		} else if m, _ := strconv.ParseUint(s.Mode, 8, 32); m&0o7000 != 0 && !s.SpecialBits {
			bits := specialBits(uint32(m))
			noun := "bit"
			if strings.Contains(bits, " and ") {
				noun = "bits"
			}
			add("mode", "%q sets the %s %s; add special_bits = true to this resource to allow it", s.Mode, bits, noun)
		}
	}
	if owned || s.Kind == User {
		for _, f := range []struct{ name, v string }{{"owner", s.Owner}, {"group", s.Group}} {
			if f.v != "" && strings.IndexFunc(f.v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == ':' || r == '/' }) >= 0 {
				add(f.name, "%q is not a user or group name or number", f.v)
			}
		}
	}
	if s.Kind == Symlink && s.State != "absent" {
		switch {
		case s.Target == "":
			add("target", "a symlink needs a target")
		case !utf8.ValidString(s.Target):
			add("target", "%q is not valid UTF-8", s.Target)
		case strings.IndexFunc(s.Target, unicode.IsControl) >= 0:
			add("target", "%q contains a control character", s.Target)
		case len(s.Target) >= unix.PathMax:
			add("target", "is %d bytes long; the system allows at most %d", len(s.Target), unix.PathMax-1)
		}
	}
	if s.Kind == File {
		checkContent(s, add)
		checkValidate(s, add)
	}
	if s.Purge && s.State == "absent" {
		add("purge", "does not apply to a directory declared absent")
	}
	if account {
		checkAccount(s, add)
	}
	return bad
}

// MaxContent is the most bytes one file's content may have. It keeps a
// node's declaration bundle, which carries every file's content, well
// within the 64 MiB a bundle holds; muster-declaration(5) states it.
const MaxContent = 16 << 20

// KindList names the resource types, for messages.
const KindList = "file, directory, symlink, package, service, user or group"

// checkContent holds a file's content to its encoding and to MaxContent.
func checkContent(s *Spec, add func(field, format string, args ...any)) {
	switch s.Encoding {
	case "":
		if !utf8.ValidString(s.Content) {
			add("content", "is not UTF-8 text; carry other bytes with encoding = \"base64\"")
			return
		}
	case "base64":
		if s.State == "absent" {
			return
		}
	default:
		add("encoding", "%q is not one muster knows (want \"base64\", or none for text)", s.Encoding)
		return
	}
	n := len(s.Content)
	if s.Encoding == "base64" {
		b, err := s.Bytes()
		if err != nil {
			add("content", "%v", err)
			return
		}
		n = len(b)
	}
	if n > MaxContent {
		add("content", "is %d bytes, over the %d MiB cap on a file's content", n, MaxContent>>20)
	}
}

// checkValidate holds a file's validate command to its rules: words
// without control characters, a program to run, and the new file named
// by %s somewhere.
func checkValidate(s *Spec, add func(field, format string, args ...any)) {
	if s.ValidateShell && len(s.Validate) == 0 {
		add("validate_shell", "says how to run validate, which is not given")
		return
	}
	if len(s.Validate) == 0 {
		return
	}
	if s.State == "absent" {
		add("validate", "does not apply to a file declared absent")
		return
	}
	if s.ValidateShell && len(s.Validate) != 1 {
		add("validate", "run through the shell, the command is one string, not %d words", len(s.Validate))
		return
	}
	named := false
	for _, w := range s.Validate {
		if !utf8.ValidString(w) || strings.IndexFunc(w, unicode.IsControl) >= 0 {
			add("validate", "%q holds a control character or is not UTF-8", w)
			return
		}
		named = named || strings.Contains(w, "%s")
	}
	switch {
	case strings.TrimSpace(s.Validate[0]) == "":
		add("validate", "names no command to run")
	case !named:
		add("validate", "%q never names the new file; write %%s where its path goes, such as \"nginx -t -c %%s\"", strings.Join(s.Validate, " "))
	}
}

// checkAccount holds a user or group to its rules.
func checkAccount(s *Spec, add func(field, format string, args ...any)) {
	for _, id := range []struct {
		name string
		v    *int
	}{{"uid", s.UID}, {"gid", s.GID}} {
		if id.v != nil && (*id.v < 0 || *id.v > maxAccountID) {
			add(id.name, "%d is not an id between 0 and %d", *id.v, maxAccountID)
		}
	}
	seen := map[string]bool{}
	for _, g := range s.Groups {
		switch why := accountReason(g); {
		case why != "":
			add("groups", "%q is not a group name: %s", g, why)
		case seen[g]:
			add("groups", "%q is listed twice", g)
		}
		seen[g] = true
	}
	if s.Groups != nil && len(s.Groups) == 0 {
		add("groups", "is empty; leave it out to leave the user's groups as they are")
	}
	for _, f := range []struct{ name, v string }{{"home", s.Home}, {"shell", s.Shell}} {
		if f.v == "" {
			continue
		}
		if why := pathReason(f.v); why != "" {
			add(f.name, "%q %s", f.v, why)
		}
	}
}

// maxAccountID is the largest uid or gid: (uid_t)-1 means "no id" to the
// system calls.
const maxAccountID = 1<<32 - 2

// accountRE is the portable form of a user or group name that shadow's
// useradd and groupadd accept without --badname.
var accountRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]*\$?$`) })

// accountReason says why name cannot be a user or group name, or "".
func accountReason(name string) string {
	switch {
	case name == "":
		return "it is empty"
	case len(name) > 32:
		return fmt.Sprintf("it is %d bytes long; useradd and groupadd take at most 32", len(name))
	case !accountRE().MatchString(name):
		return "use lowercase letters, digits, _ and -, starting with a letter or _"
	}
	return ""
}

// pathReason says why p cannot name a managed path, or "".
func pathReason(p string) string {
	switch {
	case p == "":
		return "is empty"
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "contains a control character"
	case !strings.HasPrefix(p, "/"):
		return "is not absolute"
	case p == "/":
		return "is the root directory"
	case len(p) >= unix.PathMax:
		return fmt.Sprintf("is %d bytes long; the system allows at most %d", len(p), unix.PathMax-1)
	}
	for part := range strings.SplitSeq(p, "/") { // no slice: every declared path passes here twice a run
		if part == ".." {
			return "contains .."
		}
		if len(part) > unix.NAME_MAX {
			return fmt.Sprintf("has a name of %d bytes; the system allows at most %d", len(part), unix.NAME_MAX)
		}
	}
	if c := path.Clean(p); c != p {
		return fmt.Sprintf("is not clean; write %q", c)
	}
	return ""
}

// unitReason says why name cannot be a systemd unit name, or "".
func unitReason(name string) string {
	switch {
	case name == "":
		return "it is empty"
	case strings.HasPrefix(name, "-"):
		return "it starts with -"
	case !utf8.ValidString(name):
		return "it is not valid UTF-8"
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "it contains a control character"
	case strings.IndexFunc(name, unicode.IsSpace) >= 0:
		return "it contains a space"
	case strings.ContainsRune(name, '/'):
		return "it contains /"
	case len(name) > unix.NAME_MAX:
		return fmt.Sprintf("it is %d bytes long; the system allows at most %d", len(name), unix.NAME_MAX)
	}
	return ""
}

// specialBits names the setuid, setgid and sticky bits set in m, such as
// "setuid and setgid"; "" when none is.
func specialBits(m uint32) string {
	var names []string
	for _, b := range []struct {
		bit  uint32
		name string
	}{{unix.S_ISUID, "setuid"}, {unix.S_ISGID, "setgid"}, {unix.S_ISVTX, "sticky"}} {
		if m&b.bit != 0 {
			names = append(names, b.name)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
