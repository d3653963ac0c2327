package lab

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Each host runs in cgroups of its own. systemd-nspawn that is not
// registered with machined puts its container in "payload" below its own
// cgroup, in every hierarchy systemd uses (the unified one, and on a
// machine with the legacy layout the name=systemd one too), and the
// host's systemd manages that subtree as its own. Two hosts started from
// one process would share it: stopping labd.service on one host would
// remove the cgroup the same unit of another host runs in, and starting
// it there would fail (status 219/CGROUP). So every systemd-nspawn is
// started in a cgroup made for its host below the lab process's own.

// cgroupsFile, in a host's scratch directory, lists the cgroups made for
// it, for removing them when the lab is closed, or reaped.
const cgroupsFile = "cgroups"

// hierarchies are the cgroup hierarchies systemd uses here: the mount
// point of each, and this process's cgroup in it.
func hierarchies() ([][2]string, error) {
	own := map[string]string{} // "" for the unified hierarchy, else the name= of a v1 one
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			own[""] = parts[2]
		case parts[1] == "name=systemd":
			own["name=systemd"] = parts[2]
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || len(fields) < 5 {
			continue
		}
		root, mp, fstype, super := unescapeMount(fields[3]), unescapeMount(fields[4]), fields[sep+1], fields[sep+3]
		key := ""
		switch {
		case fstype == "cgroup2":
		case fstype == "cgroup" && hasOption(super, "name=systemd"):
			key = "name=systemd"
		default:
			continue
		}
		cg, ok := own[key]
		if !ok || !strings.HasPrefix(cg+"/", strings.TrimSuffix(root, "/")+"/") {
			continue
		}
		out = append(out, [2]string{mp, filepath.Join(mp, strings.TrimPrefix(cg, root))})
		delete(own, key) // one mount of each is enough
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy of systemd's is mounted (cgroup2, or cgroup with name=systemd)")
	}
	return out, nil
}

func hasOption(opts, opt string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// makeCgroups makes a cgroup called name below this process's own in
// each of systemd's hierarchies, records them in dir, and returns them.
func makeCgroups(dir, name string) ([]string, error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	var made []string
	for _, h := range hs {
		cg := filepath.Join(h[1], name)
		if err := os.Mkdir(cg, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("make a cgroup for the host: %w", err)
		}
		made = append(made, cg)
	}
	if err := os.WriteFile(filepath.Join(dir, cgroupsFile), []byte(strings.Join(made, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return made, nil
}

// removeCgroups removes the cgroups the hosts of the lab in dir ran in,
// with whatever their systemd left below them. A cgroup that still holds
// processes cannot be removed, and is left.
func removeCgroups(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", cgroupsFile))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, cg := range strings.Fields(string(b)) {
			if !strings.HasPrefix(cg, "/sys/fs/cgroup/") {
				continue // not a cgroup this lab made
			}
			var dirs []string
			filepath.WalkDir(cg, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
			for _, d := range dirs {
				os.Remove(d) // rmdir: a cgroup's files go with it
			}
		}
	}
}
