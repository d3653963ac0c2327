package declare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/spool"
)

// A dry run shows, for each resource that changes, its old and new
// settings and how its content changed. The old ones come from the
// settings document the declare run of the generation compared with wrote
// (generation.Settings): the manifest holds only digests, and every
// node's bundle is sealed to that node alone.

// ResourceChange is how one resource changes for a node.
type ResourceChange struct {
	ID string `json:"id"`
	// Settings are the settings whose value changes, content aside.
	Settings []SettingChange `json:"settings"`
	// Content says how the content changed: a unified diff of text, or
	// for secret and binary content a note that never shows it; empty
	// when it did not change.
	Content string `json:"content"`
	// Note says why old values cannot be shown, when they cannot.
	Note string `json:"note"`
	// Key is the same for the same change on every node: the old and
	// new settings' digests.
	Key string `json:"-"`
}

// SettingChange is one setting's old and new value, as the declaration
// spells it: "(none)" for one not given.
type SettingChange struct {
	Name string `json:"name"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// maxDiff bounds the text a content diff is made of, per side.
const maxDiff = 1 << 20

// encodeSettings writes the settings document of generation gen, written
// by run (generation.Settings): the manifest's table, each resource in
// the TOML its entry already has, as the nodes' declarations are written,
// but a secret's, whose content is replaced by its digest.
func (p *plan) encodeSettings(buf *bytes.Buffer, gen uint64, run string) error {
	fmt.Fprintf(buf, "version = %d\ngeneration = %d\n", generation.SettingsVersion, gen)
	writeKey(buf, "run", run)
	var one [1]generation.SettingsResource
	enc := toml.NewEncoder(buf)
	for _, e := range p.table {
		buf.WriteByte('\n')
		if !e.spec.Secret {
			buf.Write(e.toml)
			continue
		}
		one[0] = generation.SettingsResource{Spec: e.spec, ContentSHA256: contentDigest(&e.spec)}
		one[0].Content = ""
		if err := enc.Encode(struct {
			Resources []generation.SettingsResource `toml:"resource"`
		}{one[:]}); err != nil {
			return fmt.Errorf("resource %s: encoding its settings as TOML: %w", e.id, err)
		}
	}
	return nil
}

// contentDigest is the SHA-256 of a file's content as bytes.
func contentDigest(s *resource.Spec) string {
	b, err := s.Bytes()
	if err != nil {
		b = s.Content
	}
	sum := sha256.Sum256([]byte(b))
	return hex.EncodeToString(sum[:])
}

// errNoSettings: the generation's settings were never written (an older
// muster declared it) or were removed with its declarations.
var errNoSettings = errors.New("no settings recorded")

// oldSettings returns the old manifest's settings, indexed by resource ID
// and digest, reading them once.
func (o *oldManifest) oldSettings(ctx context.Context, m *mesh.Mesh) (map[string]*generation.SettingsResource, error) {
	if o.settingsRead {
		return o.settings, o.settingsErr
	}
	o.settingsRead = true
	o.settings, o.settingsErr = readSettings(ctx, m, o.gen, o.m)
	return o.settings, o.settingsErr
}

func readSettings(ctx context.Context, m *mesh.Mesh, gen uint64, man *generation.Manifest) (map[string]*generation.SettingsResource, error) {
	name := spool.SettingsName(gen, man.Run)
	data, err := m.Spool.Get(ctx, name, 0)
	if errors.Is(err, spool.ErrNotFound) {
		return nil, errNoSettings
	}
	if err != nil {
		return nil, err
	}
	var doc generation.Settings
	if err := bundle.OpenTOML(data, generation.SettingsCtx(gen, man.Run), m.Pair.Age, m.Verifier(), &doc); err != nil {
		return nil, fmt.Errorf("settings of generation %d: %w", gen, err)
	}
	if doc.Version != generation.SettingsVersion || doc.Generation != gen || doc.Run != man.Run || len(doc.Resources) != len(man.Resources) {
		return nil, fmt.Errorf("settings %s do not match the manifest of generation %d", name, gen)
	}
	out := make(map[string]*generation.SettingsResource, len(doc.Resources))
	for i, r := range man.Resources {
		s := &doc.Resources[i]
		if s.ID() != r.ID {
			return nil, fmt.Errorf("settings %s do not match the manifest of generation %d: resource %d is %s, not %s", name, gen, i, s.ID(), r.ID)
		}
		out[r.ID+" "+r.Digest] = s
	}
	return out, nil
}

// changeSource is where a node's old resources are: the manifest it was
// compared with, and its entry there.
type changeSource struct {
	from *oldManifest
	on   *generation.ManifestNode
}

// explain fills in, for a dry run, how each changed resource of each node
// changes. A node's old settings that cannot be read leave a note on each
// of its changes instead; only an error reaching the spool is returned.
func (p *plan) explain(ctx context.Context, m *mesh.Mesh, res *Result, gen uint64) error {
	byName := make(map[string]*nodePlan, len(p.nodes))
	for i := range p.nodes {
		byName[p.nodes[i].id.Name] = &p.nodes[i]
	}
	made := map[string]ResourceChange{}
	for i := range res.Nodes {
		nc := &res.Nodes[i]
		src, ok := p.sources[nc.Name]
		np := byName[nc.Name]
		if len(nc.Changed) == 0 || !ok || np == nil {
			continue
		}
		olds, err := src.from.oldSettings(ctx, m)
		if err != nil && !errors.Is(err, errNoSettings) && (errors.Is(err, spool.ErrUnavailable) || ctx.Err() != nil) {
			return err
		}
		before, berr := src.from.resources(src.on)
		digests := make(map[string]string, len(before))
		for _, r := range before {
			digests[r.ID] = r.Digest
		}
		for _, id := range nc.Changed {
			j, found := slices.BinarySearchFunc(np.entries, id, func(e *entry, id string) int { return strings.Compare(e.id, id) })
			if !found {
				continue
			}
			e := np.entries[j]
			key := id + " " + digests[id] + " " + e.digest
			if c, ok := made[key]; ok {
				nc.Changes = append(nc.Changes, c)
				continue
			}
			c := ResourceChange{ID: id, Key: key}
			old := olds[id+" "+digests[id]]
			switch {
			case err != nil && errors.Is(err, errNoSettings):
				c.Note = fmt.Sprintf("old settings not shown: generation %d has no settings recorded (an older muster declared it, or gc removed its declarations)", src.from.gen)
			case err != nil:
				c.Note = "old settings not shown: " + err.Error()
			case berr != nil || old == nil:
				c.Note = fmt.Sprintf("old settings not shown: generation %d's settings do not hold this resource", src.from.gen)
			default:
				c.Settings, c.Content = compareSpecs(old, &e.spec, src.from.gen, gen)
			}
			made[key] = c
			nc.Changes = append(nc.Changes, c)
		}
	}
	return nil
}

// compareSpecs lists the settings that differ between old (of generation
// from) and new (of generation to), and how the content changed. Secret
// content is compared by digest and never shown; content that is not
// text is shown by size.
func compareSpecs(old *generation.SettingsResource, new *resource.Spec, from, to uint64) ([]SettingChange, string) {
	o, n := &old.Spec, new
	var out []SettingChange
	add := func(name, a, b string) {
		if a != b {
			out = append(out, SettingChange{Name: name, Old: orNone(a), New: orNone(b)})
		}
	}
	add("state", o.State, n.State)
	add("version", o.Version, n.Version)
	add("target", o.Target, n.Target)
	add("mode", o.Mode, n.Mode)
	add("owner", o.Owner, n.Owner)
	add("group", o.Group, n.Group)
	add("enabled", boolText(o.Enabled), boolText(n.Enabled))
	add("running", boolText(o.Running), boolText(n.Running))
	add("restart_on", listText(o.RestartOn), listText(n.RestartOn))
	add("secret", strconv.FormatBool(o.Secret), strconv.FormatBool(n.Secret))
	add("encoding", o.Encoding, n.Encoding)
	add("special_bits", strconv.FormatBool(o.SpecialBits), strconv.FormatBool(n.SpecialBits))
	add("replace_symlink", strconv.FormatBool(o.ReplaceSymlink), strconv.FormatBool(n.ReplaceSymlink))
	add("validate", listText(o.Validate), listText(n.Validate))
	add("validate_shell", strconv.FormatBool(o.ValidateShell), strconv.FormatBool(n.ValidateShell))
	add("purge", strconv.FormatBool(o.Purge), strconv.FormatBool(n.Purge))
	add("uid", intText(o.UID), intText(n.UID))
	add("gid", intText(o.GID), intText(n.GID))
	add("groups", listText(o.Groups), listText(n.Groups))
	add("home", o.Home, n.Home)
	add("shell", o.Shell, n.Shell)
	add("system", strconv.FormatBool(o.System), strconv.FormatBool(n.System))
	add("order", strconv.Itoa(o.Order), strconv.Itoa(n.Order))
	return out, contentChange(old, new, from, to)
}

// contentChange says how a file's content changed; empty when it did
// not.
func contentChange(old *generation.SettingsResource, new *resource.Spec, from, to uint64) string {
	if old.Kind != resource.File || new.Kind != resource.File {
		return ""
	}
	if old.Secret || new.Secret {
		a := old.ContentSHA256
		if !old.Secret {
			a = contentDigest(&old.Spec)
		}
		if a == contentDigest(new) {
			return ""
		}
		return "content changed (secret, not shown)"
	}
	a, aerr := old.Bytes()
	b, berr := new.Bytes()
	switch {
	case aerr != nil || berr != nil:
		if old.Content == new.Content {
			return ""
		}
		return "content changed (not decodable, not shown)"
	case a == b:
		return ""
	case !utf8.ValidString(a) || !utf8.ValidString(b) || strings.IndexByte(a, 0) >= 0 || strings.IndexByte(b, 0) >= 0:
		return fmt.Sprintf("content changed (binary, %d bytes → %d bytes)", len(a), len(b))
	case len(a) > maxDiff || len(b) > maxDiff:
		return fmt.Sprintf("content changed (%d bytes → %d bytes, too long to show)", len(a), len(b))
	}
	id := new.ID()
	return udiff.Unified(fmt.Sprintf("%s (generation %d)", id, from), fmt.Sprintf("%s (generation %d)", id, to), a, b)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func boolText(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

func intText(i *int) string {
	if i == nil {
		return ""
	}
	return strconv.Itoa(*i)
}

func listText(l []string) string {
	if l == nil {
		return ""
	}
	return "[" + strings.Join(l, ", ") + "]"
}
