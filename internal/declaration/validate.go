package declaration

import (
	"fmt"
	"slices"
	"strings"

	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// shellSyntax are the characters that mean something to a shell. A
// validate command given as one string without validate_shell is split at
// blanks and run as it is, so one of them there would not do what it
// seems to.
const shellSyntax = "'\"\\$`;&|<>(){}*?[]~#!"

// validate reads a file's validate and validate_shell into spec: a string
// of words, or an array of them, run without a shell; with validate_shell
// = true, one string run by /bin/sh -c.
func (s *settings) validate(spec *resource.Spec) {
	shell, _ := s.boolean("validate_shell")
	v, ok := s.t["validate"]
	switch {
	case !ok:
		if shell != nil && *shell {
			s.errorf("validate_shell", "says how to run validate, which is not given")
		}
		return
	case shell != nil && *shell:
		str, isStr := v.(string)
		if !isStr {
			s.errorf("validate", "with validate_shell = true, must be one string for the shell, not %s", tomlfile.TypeName(v))
			return
		}
		spec.Validate, spec.ValidateShell = []string{str}, true
		return
	}
	switch x := v.(type) {
	case string:
		if i := strings.IndexAny(x, shellSyntax); i >= 0 {
			s.errorf("validate", "%q holds %q, which only a shell understands, and validate runs without one; write the command as an array of words, such as [\"nginx\", \"-t\", \"-c\", \"%%s\"], or set validate_shell = true to run it with /bin/sh -c", x, x[i:i+1])
			return
		}
		spec.Validate = strings.Fields(x)
		if len(spec.Validate) == 0 {
			s.errorf("validate", "is empty")
		}
	case []any:
		words, ok := s.fp.stringList(slices.Concat(s.key, []string{"validate"}), x)
		if !ok {
			s.ok = false
			s.reported["validate"] = true
			return
		}
		if len(words) == 0 {
			s.errorf("validate", "is empty")
			return
		}
		spec.Validate = words
	default:
		s.errorf("validate", "must be a string or an array of strings, not %s", tomlfile.TypeName(v))
	}
}

// validateShown is a validate command as a diff shows it.
func validateShown(s resource.Spec) string {
	if len(s.Validate) == 0 {
		return ""
	}
	if s.ValidateShell {
		return s.Validate[0]
	}
	return fmt.Sprintf("%q", s.Validate)
}
