package declaration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/muster-tool/muster/internal/resource"
)

// Diff compares two resolved states of one node by resource ID: IDs only in
// new are added, IDs only in old are removed, and IDs in both whose
// settings differ are changed. Each list is sorted. It is what
// `declare --dry-run` shows per node.
func Diff(old, new []resource.Spec) (added, changed, removed []string) {
	before := make(map[string]*resource.Spec, len(old))
	for i := range old {
		before[old[i].ID()] = &old[i]
	}
	after := make(map[string]bool, len(new))
	for i := range new {
		id := new[i].ID()
		after[id] = true
		switch o, ok := before[id]; {
		case !ok:
			added = append(added, id)
		case !sameSpec(*o, new[i]):
			changed = append(changed, id)
		}
	}
	for id := range before {
		if !after[id] {
			removed = append(removed, id)
		}
	}
	sort.Strings(added)
	sort.Strings(changed)
	sort.Strings(removed)
	return added, changed, removed
}

// Changes describes how new differs from old, one setting a line, such as
// "mode: 0644 -> 0600". Content is only ever shown as a digest, so secrets
// stay out of dry-run output and CI logs.
func Changes(old, new resource.Spec) []string {
	a, b := settingsOf(old), settingsOf(new)
	var out []string
	for i := range a {
		if a[i].value != b[i].value {
			out = append(out, a[i].name+": "+shown(a[i])+" -> "+shown(b[i]))
		}
	}
	return out
}

// Summary describes one resource on one line, such as
// "file:/etc/motd content=sha256:3a2b8c1d4e5f mode=0644"; content appears
// only as a digest.
func Summary(s resource.Spec) string {
	parts := []string{s.ID()}
	for _, f := range settingsOf(s) {
		if f.value != "" {
			parts = append(parts, f.name+"="+f.value)
		}
	}
	return strings.Join(parts, " ")
}

// Digest names content by a prefix of its SHA-256, which is how content
// is shown anywhere a person may read it.
func Digest(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

type setting struct{ name, value string }

// settingsOf lists a spec's settings as text, in a fixed order. Kind and
// path or name are its ID and not listed.
func settingsOf(s resource.Spec) []setting {
	content := ""
	if s.Kind == resource.File && s.State != "absent" {
		content = contentShown(s)
	}
	order := ""
	if s.Order != 0 {
		order = strconv.Itoa(s.Order)
	}
	return append([]setting{
		{"state", s.State},
		{"content", content},
		{"secret", boolText(s.Secret)},
		{"validate", validateShown(s)},
		{"validate_shell", boolText(s.ValidateShell)},
		{"mode", s.Mode},
		{"special_bits", boolText(s.SpecialBits)},
		{"owner", s.Owner},
		{"group", s.Group},
		{"replace_symlink", boolText(s.ReplaceSymlink)},
		{"purge", boolText(s.Purge)},
		{"target", s.Target},
		{"version", s.Version},
		{"enabled", optBool(s.Enabled)},
		{"running", optBool(s.Running)},
		{"restart_on", strings.Join(s.RestartOn, ",")},
		{"order", order},
	}, accountSettings(s)...)
}

// contentShown is a file's content as a diff shows it: a digest, and for
// content that is not text (which no one reads in a diff) its size too.
func contentShown(s resource.Spec) string {
	if s.Encoding == "" {
		return Digest(s.Content)
	}
	b, err := s.Bytes()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return fmt.Sprintf("%s (%d bytes, binary)", Digest(b), len(b))
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return ""
}

func optBool(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// shown is a setting's value in Changes, naming what an empty one means.
func shown(s setting) string {
	switch {
	case s.value != "":
		return s.value
	case s.name == "secret" || s.name == "special_bits" || s.name == "replace_symlink" ||
		s.name == "validate_shell" || s.name == "purge" || s.name == "system":
		return "false"
	}
	return "(none)"
}
