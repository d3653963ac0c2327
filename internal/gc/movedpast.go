package gc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/muster-tool/muster/internal/atomicfile"
)

// Pending is what MovedPast learned of a generation it could not decide:
// the nodes it assigned a bundle that no generation after it, up to
// Through, assigned one. Runs is the digest of the runs the commits of
// generations gen to Through name (runsDigest): it is used again only
// while the spool's commits name the same runs, so that it stands for the
// very manifests it was read from.
type Pending struct {
	Through uint64   `json:"through"`
	Runs    string   `json:"runs"`
	Waiting []string `json:"waiting"`
}

// MovedPast says which of the candidate generations every node they
// assigned a bundle has moved past: each of those nodes was assigned a
// bundle by a newer committed generation too. A host fetches the newest
// committed generation that holds a bundle for it, so until then a node
// may still need the older one. A generation whose manifest cannot be
// read is not moved past, and moves no older one past.
//
// The manifests are read oldest first, from the oldest candidate up, and
// only until every candidate is decided: when a fleet declares to the same
// nodes, two manifests decide a generation. A node that no newer
// generation names (one no role selects any more) keeps its generation;
// known carries what an earlier gc learned of such generations, so that
// only the manifests declared since are read, and pending is what to
// carry to the next.
func MovedPast(ctx context.Context, commits map[uint64]string, candidates []uint64, assigned Assigned, known map[uint64]Pending) (moved map[uint64]bool, pending map[uint64]Pending, err error) {
	type candidate struct {
		gen uint64
		// after is the newest generation whose manifest counted;
		// waiting the nodes no manifest after gen up to it assigned.
		// Both are set once gen's own manifest is read, or from known.
		after   uint64
		waiting map[string]bool
		started bool
		done    bool // moved past, or its manifest cannot be read
	}
	moved, pending = map[uint64]bool{}, map[uint64]Pending{}
	var cs []*candidate
	for _, g := range slices.Sorted(slices.Values(candidates)) {
		c := &candidate{gen: g}
		if k, ok := known[g]; ok && k.Through > g && len(k.Waiting) > 0 && commits[k.Through] != "" && runsDigest(commits, g, k.Through) == k.Runs {
			c.after, c.started = k.Through, true
			c.waiting = make(map[string]bool, len(k.Waiting))
			for _, id := range k.Waiting {
				c.waiting[id] = true
			}
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return moved, pending, nil
	}
	for _, h := range sortedGens(commits) {
		if h < cs[0].gen {
			continue
		}
		// Who needs generation h's manifest: a candidate not started
		// yet, for its own nodes, and any started one older than h that
		// has not counted h.
		need, ahead := false, false
		for _, c := range cs {
			if c.done {
				continue
			}
			switch {
			case !c.started && c.gen == h, c.started && c.gen < h && c.after < h:
				need = true
			case !c.started && c.gen > h:
				ahead = true
			}
		}
		if !need {
			if !ahead {
				break
			}
			continue
		}
		ids, ok, err := assigned(ctx, h, commits[h])
		if err != nil {
			return nil, nil, err
		}
		// Each waiting candidate looks its own nodes up in h's: many
		// may wait, each on a few nodes no role selects any more.
		in := map[string]bool{}
		if ok {
			in = make(map[string]bool, len(ids))
			for _, id := range ids {
				in[id] = true
			}
		}
		for _, c := range cs {
			switch {
			case c.done:
			case c.started && c.gen < h && c.after < h:
				for id := range c.waiting {
					if in[id] {
						delete(c.waiting, id)
					}
				}
				c.after = h
				if len(c.waiting) == 0 {
					c.done, moved[c.gen] = true, true
				}
			case !c.started && c.gen == h:
				c.started, c.after = true, h
				c.waiting = make(map[string]bool, len(ids))
				for _, id := range ids {
					c.waiting[id] = true
				}
				switch {
				case !ok:
					c.done = true // kept, and looked at again next time
				case len(ids) == 0:
					c.done, moved[c.gen] = true, true // it assigned nothing
				}
			}
		}
	}
	for _, c := range cs {
		if c.started && !c.done {
			pending[c.gen] = Pending{Through: c.after, Runs: runsDigest(commits, c.gen, c.after), Waiting: slices.Sorted(maps.Keys(c.waiting))}
		}
	}
	return moved, pending, nil
}

// runsDigest is the digest of the runs the commits of generations from to
// through name, in order.
func runsDigest(commits map[uint64]string, from, through uint64) string {
	h := sha256.New()
	for _, g := range sortedGens(commits) {
		if g >= from && g <= through {
			fmt.Fprintf(h, "%d %s\n", g, commits[g])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// memoVersion is the version of the file gc keeps Pending in.
const memoVersion = 1

// memo is the file gc keeps Pending in, one per spool in the mesh's
// cache directory.
type memo struct {
	Version int                `json:"version"`
	Spool   string             `json:"spool"`
	Pending map[string]Pending `json:"pending"` // by generation
}

// readMemo returns what the file at path keeps for spool: nothing when
// there is no file, and nothing with the reason when it cannot be used.
func readMemo(path, spool string) (map[uint64]Pending, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m memo
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if m.Version != memoVersion || m.Spool != spool {
		return nil, fmt.Errorf("%s: version %d for spool %q, want version %d for %q", path, m.Version, m.Spool, memoVersion, spool)
	}
	out := make(map[uint64]Pending, len(m.Pending))
	for k, p := range m.Pending {
		g, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: generation %q: %v", path, k, err)
		}
		out[g] = p
	}
	return out, nil
}

// writeMemo replaces the file at path with pending for spool.
func writeMemo(path, spool string, pending map[uint64]Pending) error {
	m := memo{Version: memoVersion, Spool: spool, Pending: make(map[string]Pending, len(pending))}
	for g, p := range pending {
		m.Pending[strconv.FormatUint(g, 10)] = p
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteCache(path, data, 0o600)
}
