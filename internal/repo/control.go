package repo

import (
	"fmt"
	"strings"
)

// control is a parsed control paragraph: its fields in order, each with
// its continuation lines.
type control struct {
	fields []field
}

type field struct {
	name  string
	value string // first line's value, then "\n" and each continuation line as written
}

// indexFields are what a repository index adds to a control paragraph;
// they never come from the package itself.
var indexFields = map[string]bool{
	"filename": true, "size": true, "md5sum": true, "sha1": true, "sha256": true, "sha512": true,
}

// parseControl reads one control paragraph (deb-control(5)): "Name: value"
// lines, each optionally followed by continuation lines starting with a
// space or tab. A blank line, a line that is neither, or a field named
// twice is an error: written into a Packages file, any of them would make
// apt read a different paragraph.
func parseControl(text string) (*control, error) {
	c := &control{}
	seen := map[string]bool{}
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil, fmt.Errorf("empty control paragraph")
	}
	for i, line := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			return nil, fmt.Errorf("control paragraph line %d is blank", i+1)
		case line[0] == ' ' || line[0] == '\t':
			if len(c.fields) == 0 {
				return nil, fmt.Errorf("control paragraph starts with a continuation line")
			}
			c.fields[len(c.fields)-1].value += "\n" + line
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok || name == "" || strings.ContainsAny(name, " \t") || name[0] == '#' || name[0] == '-' {
				return nil, fmt.Errorf("control paragraph line %d is not a field: %q", i+1, line)
			}
			if seen[strings.ToLower(name)] {
				return nil, fmt.Errorf("control paragraph names field %s twice", name)
			}
			seen[strings.ToLower(name)] = true
			c.fields = append(c.fields, field{name: name, value: strings.TrimSpace(value)})
		}
	}
	return c, nil
}

// get returns a single-line field's value ("" when absent).
func (c *control) get(name string) string {
	for _, f := range c.fields {
		if strings.EqualFold(f.name, name) {
			v, _, _ := strings.Cut(f.value, "\n")
			return v
		}
	}
	return ""
}

// withoutIndexFields writes the paragraph back without the fields a
// repository index adds, ending in one newline.
func (c *control) withoutIndexFields() string {
	var b strings.Builder
	for _, f := range c.fields {
		if indexFields[strings.ToLower(f.name)] {
			continue
		}
		b.WriteString(f.name)
		b.WriteString(":")
		if f.value != "" && f.value[0] != '\n' {
			b.WriteString(" ")
		}
		b.WriteString(f.value)
		b.WriteString("\n")
	}
	return b.String()
}

// checkName accepts a Debian package name (deb-control(5)): lower case
// letters, digits, "+", "-" and ".", at least two long, starting with a
// letter or digit.
func checkName(name string) error {
	ok := len(name) >= 2 && isLowerAlnum(name[0])
	for i := 1; ok && i < len(name); i++ {
		c := name[i]
		ok = isLowerAlnum(c) || c == '+' || c == '-' || c == '.'
	}
	if !ok {
		return fmt.Errorf("package name %q is not a valid Debian package name", name)
	}
	return nil
}

// checkVersion accepts a Debian version (deb-version(7)) that starts with
// a digit: letters, digits and ". + ~ - :".
func checkVersion(v string) error {
	ok := v != "" && v[0] >= '0' && v[0] <= '9'
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = isLowerAlnum(c) || (c >= 'A' && c <= 'Z') || strings.IndexByte(".+-~:", c) >= 0
	}
	if !ok {
		return fmt.Errorf("version %q is not a valid Debian version", v)
	}
	return nil
}

func checkArch(a string) error {
	ok := a != ""
	for i := 0; ok && i < len(a); i++ {
		ok = isLowerAlnum(a[i]) || a[i] == '-'
	}
	if !ok {
		return fmt.Errorf("architecture %q is not a valid Debian architecture", a)
	}
	return nil
}

func isLowerAlnum(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }
