package declaration

import (
	"fmt"
	"slices"
	"strings"

	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// account reads a [role.NAME.user.NAME] or [role.NAME.group.NAME] table
// into spec. The rules the settings follow are resource.Check's.
func (s *settings) account(kind resource.Kind, name string, spec *resource.Spec) {
	spec.Name = name
	if kind == resource.Group {
		s.only(kind, "gid", "system", "state", "order")
	} else {
		s.only(kind, "uid", "group", "groups", "home", "shell", "system", "state", "order")
	}
	spec.State = s.state()
	if spec.State == "absent" {
		for _, k := range []string{"uid", "gid", "group", "groups", "home", "shell", "system"} {
			if s.has(k) {
				s.warnf(k, "ignored: the %s is declared absent", kind)
			}
		}
		return
	}
	if b, ok := s.boolean("system"); ok {
		spec.System = *b
	}
	if kind == resource.Group {
		spec.GID = s.id("gid")
		return
	}
	spec.UID = s.id("uid")
	for _, k := range []string{"group", "home", "shell"} {
		v, ok := s.str(k)
		switch {
		case !ok:
		case v == "":
			s.errorf(k, "is empty; leave it out to leave it as useradd makes it")
		case k == "group":
			spec.Group = v
		case k == "home":
			spec.Home = v
		default:
			spec.Shell = v
		}
	}
	if v, ok := s.t["groups"]; ok {
		groups, ok := s.fp.stringList(slices.Concat(s.key, []string{"groups"}), v)
		if !ok {
			s.ok = false
			s.reported["groups"] = true
		} else {
			spec.Groups = groups
		}
	}
}

// id reads a uid or gid: an integer.
func (s *settings) id(name string) *int {
	v, ok := s.t[name]
	if !ok {
		return nil
	}
	n, isInt := v.(int64)
	if !isInt {
		s.errorf(name, "must be an integer, not %s", tomlfile.TypeName(v))
		return nil
	}
	id := int(n) // its range is resource.Check's
	if int64(id) != n {
		id = -1
	}
	return &id
}

// accountSettings lists a user's or group's settings for a diff.
func accountSettings(s resource.Spec) []setting {
	return []setting{
		{"uid", optInt(s.UID)},
		{"gid", optInt(s.GID)},
		{"groups", strings.Join(s.Groups, ",")},
		{"home", s.Home},
		{"shell", s.Shell},
		{"system", boolText(s.System)},
	}
}

func optInt(p *int) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}
