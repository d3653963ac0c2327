package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/repo"
)

// cmdSpoolRepo is the "spool repo" group: the package repository that
// lives inside the spool.
func cmdSpoolRepo() *Command {
	return &Command{
		Name:  "repo",
		Short: "the package repository inside the spool",
		Long: `Packages for the hosts, muster itself first, travel in the spool with
their declarations, so an air-gapped site receives them with the same copy
and an S3 spool needs no web server. Each host materializes the repository
into its state directory and reads it with apt; see muster-upgrade(7).`,
		Sub: []*Command{cmdSpoolRepoAdd(), cmdSpoolRepoList()},
	}
}

// repoAddJSONVersion is the version of muster spool repo add --json.
const repoAddJSONVersion = 1

type repoAddJSON struct {
	Version  int              `json:"version"`
	Spool    string           `json:"spool"`
	Index    uint64           `json:"index"`
	Packages []repoAddPackage `json:"packages"`
}

type repoAddPackage struct {
	File    string `json:"file"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Object  string `json:"object"`
	Added   bool   `json:"added"`
}

// spoolRepoAddOptions are the flags of muster spool repo add.
type spoolRepoAddOptions struct {
	Output output
}

func (o *spoolRepoAddOptions) addFlags(fs *pflag.FlagSet) {
	o.Output.addFlags(fs, jsonFlag)
}

func cmdSpoolRepoAdd() *Command {
	var o spoolRepoAddOptions
	return &Command{
		Name:  "add",
		Usage: "muster spool repo add [--json] PACKAGE.deb...",
		Short: "publish Debian packages to the mesh's repository in the spool",
		Long: `Store each Debian package in the spool as a bundle signed by the mesh key,
under repo/pool/NAME/VERSION_ARCH.deb, and write a new repository index,
repo/index/SEQ, signed by the mesh, that lists every package the repository
holds with its control fields, size and SHA-256. Hosts fetch the newest
index at each apply, verify it and every package against the mesh key they
pinned, and write a flat apt repository in their state directory (see
muster-upgrade(7)).

Each package file is read with dpkg-deb, which must be installed. A package
the repository already holds with the same bytes is left as it is. A
package whose name, version and architecture are there with other bytes is
refused, and nothing of the batch is written: a version is published once,
so a rebuilt package needs a new version. Two adds at once both land: each
index is written only if absent, and the one that loses starts again from
the winner's.

Prints one line per package, or with --json: {"version": 1, "spool",
"index", "packages": [{"file", "name", "version", "arch", "size", "sha256",
"object", "added"}]}.`,
		Examples: `# publish a new muster to every host that reads this spool
make deb
muster spool repo add dist/muster_1.5.0_amd64.deb dist/muster_1.5.0_arm64.deb`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runSpoolRepoAdd(env, o, args) },
	}
}

// runSpoolRepoAdd publishes Debian packages to the repository in the spool.
func runSpoolRepoAdd(env *Env, o spoolRepoAddOptions, args []string) error {
	if err := needArgs(args, 1, -1, "package files"); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	var debs []*repo.Deb
	for _, path := range args {
		d, err := repo.ReadDeb(env.Ctx, path)
		if err != nil {
			return err
		}
		debs = append(debs, d)
	}
	m, err := openMesh(env)
	if err != nil {
		return err
	}
	res, err := repo.Add(env.Ctx, m.Spool, m.Pair.Sign, debs, env.Now())
	if err != nil {
		return err
	}
	if f == jsonFormat {
		out := repoAddJSON{Version: repoAddJSONVersion, Spool: m.Spool.String(), Index: res.Index, Packages: []repoAddPackage{}}
		for _, p := range res.Packages {
			out.Packages = append(out.Packages, repoAddPackage{File: p.Path, Name: p.Name, Version: p.Version, Arch: p.Arch,
				Size: p.Size, SHA256: p.SHA256, Object: p.Object, Added: !p.Present})
		}
		return writeJSON(env.Stdio.Out, out)
	}
	for _, p := range res.Packages {
		verb := "added"
		if p.Present {
			verb = "already present"
		}
		fmt.Fprintf(env.Stdio.Out, "%-15s %s as %s\n", verb, p.Package, p.Object)
	}
	fmt.Fprintf(env.Stdio.Out, "repository index %d in spool %s\n", res.Index, m.Spool)
	return nil
}

// repoListJSONVersion is the version of muster spool repo list --json.
const repoListJSONVersion = 1

type repoListJSON struct {
	Version int    `json:"version"`
	Spool   string `json:"spool"`
	// Index is the newest index that verifies; 0 when there is none.
	Index    uint64            `json:"index"`
	Packages []repoListPackage `json:"packages"`
}

type repoListPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Object  string `json:"object"`
}

// spoolRepoListOptions are the flags of muster spool repo list.
type spoolRepoListOptions struct {
	Output output
}

func (o *spoolRepoListOptions) addFlags(fs *pflag.FlagSet) {
	o.Output.addFlags(fs, tableFlag, jsonFlag)
}

func cmdSpoolRepoList() *Command {
	var o spoolRepoListOptions
	return &Command{
		Name:  "list",
		Usage: "muster spool repo list [--table | --json]",
		Short: "list the packages the mesh's repository in the spool holds",
		Long: `List every package of the mesh's repository in the spool, as its newest
index that verifies against the mesh key lists it: name, version and
architecture, one line each, sorted by name, then by version and
architecture as text.
These are the versions a declaration may ask for of a package the
repository holds (see muster-declare(1)). Indexes that do not verify are
skipped with a warning. It reads the spool and changes nothing.

--json prints {"version": 1, "spool", "index", "packages": [{"name",
"version", "arch", "size", "sha256", "object"}]}; index is 0 and packages
empty when the repository holds nothing.`,
		Examples: `muster spool repo list
muster spool repo list --json |
  jq -r '.packages[] | select(.name == "muster") | .version'`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Flags:  o.addFlags,
		Run:    func(env *Env, args []string) error { return runSpoolRepoList(env, o, args) },
	}
}

// runSpoolRepoList lists the packages the repository in the spool holds.
func runSpoolRepoList(env *Env, o spoolRepoListOptions, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	f, err := o.Output.chosen()
	if err != nil {
		return err
	}
	m, err := openMesh(env)
	if err != nil {
		return err
	}
	x, err := repo.ReadIndexes(env.Ctx, m.Spool, m.Verifier())
	if err != nil {
		return err
	}
	for _, s := range x.Skipped {
		env.Warnf("%s", s)
	}
	doc := repoListJSON{Version: repoListJSONVersion, Spool: m.Spool.String(), Packages: []repoListPackage{}}
	if ix := x.Newest; ix != nil {
		doc.Index = ix.Seq
		for _, p := range ix.Packages {
			doc.Packages = append(doc.Packages, repoListPackage{Name: p.Name, Version: p.Version, Arch: p.Arch, Size: p.Size, SHA256: p.SHA256, Object: p.Object})
		}
	}
	w := env.Stdio.Out
	switch {
	case f == jsonFormat:
		return writeJSON(w, doc)
	case len(doc.Packages) == 0:
		fmt.Fprintf(env.Stdio.Err, "muster: the repository in spool %s holds no packages\n", m.Spool)
		return nil
	}
	rows := make([][]string, len(doc.Packages))
	for i, p := range doc.Packages {
		rows[i] = []string{p.Name, p.Version, p.Arch}
	}
	if f == tableFormat {
		return writeTable(w, []column{{title: "PACKAGE"}, {title: "VERSION"}, {title: "ARCH"}}, rows)
	}
	for _, line := range alignRows(rows) {
		fmt.Fprintln(w, line)
	}
	return nil
}
