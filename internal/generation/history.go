package generation

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/muster-tool/muster/spool"
)

// History is a spool's commits as one mesh sees them: read newest first,
// only as far as a caller asks, and trusted only when they verify against
// the mesh's signing key. A commit that does not verify (signed by another
// key, damaged, filed under another generation's name) is junk: it is
// skipped and recorded in Skipped, never obeyed and never deleted, so one
// stray object in a shared spool stops neither the mesh nor the fleet.
//
// Each commit names the one it follows (Commit.Previous), so a generation
// has exactly one history. Trace tells whether a commit's history holds a
// given commit, which is how a host refuses a fork of what it applied and
// a mesh refuses a spool restored from an older copy.
type History struct {
	sp     spool.Spool
	mesh   ed25519.PublicKey
	listed []uint64 // generations with a commit object, newest first
	etags  map[uint64]string
	known  *Known
	read   map[uint64]*Commit
	junk   map[uint64]bool
	// Skipped are the commits that failed verification, in the order
	// they were read.
	Skipped []Skipped
}

// Skipped is a commit object that did not verify.
type Skipped struct {
	Generation uint64
	Name       string
	Err        error
}

func (s Skipped) String() string {
	return fmt.Sprintf("%s skipped: %v", s.Name, s.Err)
}

// LoadHistory lists the commits in sp; it reads none of them yet.
func LoadHistory(ctx context.Context, sp spool.Spool, mesh ed25519.PublicKey) (*History, error) {
	return LoadHistoryFrom(ctx, sp, mesh, 0, nil)
}

// Known is a commit a reader verified before: its generation and Digest,
// kept where only that reader can change them (a host's state, under its
// key), and on a store with tags the tag of its object (spool.Info.ETag)
// as a listing showed it then, with its bytes.
type Known struct {
	Generation uint64
	Digest     string
	ETag       string
	Data       []byte
}

// sum is k's digest as bytes, when k is of generation gen.
func (k *Known) sum(gen uint64) ([sha256.Size]byte, bool) {
	var sum [sha256.Size]byte
	if k == nil || k.Generation != gen {
		return sum, false
	}
	h, ok := strings.CutPrefix(k.Digest, "sha256:")
	if !ok || hex.DecodedLen(len(h)) != len(sum) {
		return sum, false
	}
	_, err := hex.Decode(sum[:], []byte(h))
	return sum, err == nil
}

// LoadHistoryFrom lists the commits of generation from and newer (all of
// them when from is 0): a host that applied generation from needs no
// older one to find what to apply, and on S3 the listing starts there
// (spool.ListAfter), so its cost does not grow with the generations
// before. It reads none of them yet.
//
// When the listing shows known's generation with known's ETag, Commit
// takes that commit from known.Data instead of reading it: the object is
// the one read before. Any other tag (a spool restored from another copy,
// a commit replaced in place) or none (a directory) reads the object as
// usual. Either way, bytes of known's Digest are not verified against the
// mesh's key again (see bundle.ReopenSignedTOML); any others are.
func LoadHistoryFrom(ctx context.Context, sp spool.Spool, mesh ed25519.PublicKey, from uint64, known *Known) (*History, error) {
	h := &History{sp: sp, mesh: mesh, etags: map[uint64]string{}, known: known, read: map[uint64]*Commit{}, junk: map[uint64]bool{}}
	after := ""
	if from > 0 {
		after = spool.CommitName(from - 1)
	}
	err := spool.ListAfter(ctx, sp, spool.CommitPrefix, after, func(i spool.Info) error {
		g, err := spool.ParseCommitName(i.Name)
		if err != nil || g < from {
			return nil // spool verify reports strays
		}
		h.listed = append(h.listed, g)
		if i.ETag != "" {
			h.etags[g] = i.ETag
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(h.listed)
	return h, nil
}

// ETag returns the tag the listing showed for generation gen's commit,
// empty when it showed none.
func (h *History) ETag(gen uint64) string { return h.etags[gen] }

// HistoryOf is a History of commits already read and verified, such as a
// cache holds; it reads nothing from a spool.
func HistoryOf(commits []*Commit) *History {
	h := &History{read: make(map[uint64]*Commit, len(commits)), junk: map[uint64]bool{}}
	for _, c := range commits {
		h.read[c.Generation] = c
		h.listed = append(h.listed, c.Generation)
	}
	slices.SortFunc(h.listed, func(a, b uint64) int { return cmp.Compare(b, a) })
	return h
}

// Listed returns the generations that have a commit object, verified or
// not, newest first.
func (h *History) Listed() []uint64 { return h.listed }

// Commit returns generation gen's commit if it verifies, and nil if there
// is no such object or it is junk (then it is added to Skipped). The error
// is only about reaching the spool.
func (h *History) Commit(ctx context.Context, gen uint64) (*Commit, error) {
	if c, ok := h.read[gen]; ok {
		return c, nil
	}
	if h.junk[gen] || h.sp == nil {
		return nil, nil
	}
	if k := h.known; k != nil && k.Generation == gen && k.ETag != "" && k.ETag == h.etags[gen] {
		if c, err := openCommit(k.Data, gen, h.mesh, k); err == nil {
			h.read[gen] = c
			return c, nil
		}
		// Bytes kept that no longer verify (a damaged state file) are
		// no reason to trust the store less: read the object.
	}
	c, err := readCommit(ctx, h.sp, gen, h.mesh, h.known)
	switch {
	case err == nil:
		h.read[gen] = c
		return c, nil
	case errors.Is(err, spool.ErrNotFound):
		return nil, nil // removed since it was listed, or never there
	case errors.Is(err, ErrUnverified):
		h.junk[gen] = true
		h.Skipped = append(h.Skipped, Skipped{Generation: gen, Name: spool.CommitName(gen), Err: err})
		return nil, nil
	}
	return nil, err
}

// Each calls fn with every commit that verifies, newest first, until fn
// returns false or an error.
func (h *History) Each(ctx context.Context, fn func(*Commit) (bool, error)) error {
	for _, g := range h.listed {
		c, err := h.Commit(ctx, g)
		if err != nil {
			return err
		}
		if c == nil {
			continue
		}
		more, err := fn(c)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// Newest returns the newest commit that verifies, or nil if none does.
func (h *History) Newest(ctx context.Context) (*Commit, error) {
	var newest *Commit
	err := h.Each(ctx, func(c *Commit) (bool, error) {
		newest = c
		return false, nil
	})
	return newest, err
}

// NextFree returns the first generation after gen that no commit object
// has taken, not even junk: where the commit after gen can be written.
func (h *History) NextFree(gen uint64) uint64 {
	taken := make(map[uint64]bool, len(h.listed))
	for _, g := range h.listed {
		taken[g] = true
	}
	next := gen + 1
	for taken[next] {
		next++
	}
	return next
}

// Verdict is what Trace found.
type Verdict int

const (
	// Holds: the history holds the commit.
	Holds Verdict = iota
	// Diverges: the history holds another commit for that generation, or
	// passes over it: the two are forks of one mesh.
	Diverges
	// Unknown: the history leaves the spool (a commit it names is missing
	// or is not the one named) or starts before muster kept one, before it
	// reaches that generation.
	Unknown
)

// Trace is what Trace found, and where.
type Trace struct {
	Verdict Verdict
	// At is the generation where the history leaves the spool or
	// diverges; Named is the digest the history names there, when it
	// names one (empty when it passes over the generation).
	At    uint64
	Named string
}

// Trace follows from's history back, commit by commit, to generation gen
// and tells whether it holds the commit with digest there. It reads only
// the commits between the two, and none when from follows gen directly.
func (h *History) Trace(ctx context.Context, from *Commit, gen uint64, digest string) (Trace, error) {
	c := from
	for {
		switch {
		case c.Generation == gen:
			if c.Digest == digest {
				return Trace{Verdict: Holds, At: gen}, nil
			}
			return Trace{Verdict: Diverges, At: gen, Named: c.Digest}, nil
		case c.Generation < gen:
			return Trace{Verdict: Diverges, At: gen}, nil
		case c.Previous == "" && c.Version < CommitVersion:
			return Trace{Verdict: Unknown, At: c.Generation}, nil
		case c.Previous == "":
			// A mesh's first commit: nothing came before it.
			return Trace{Verdict: Diverges, At: gen}, nil
		case c.PreviousGeneration == gen:
			if c.Previous == digest {
				return Trace{Verdict: Holds, At: gen}, nil
			}
			return Trace{Verdict: Diverges, At: gen, Named: c.Previous}, nil
		case c.PreviousGeneration < gen:
			return Trace{Verdict: Diverges, At: gen}, nil
		}
		p, err := h.Commit(ctx, c.PreviousGeneration)
		if err != nil {
			return Trace{}, err
		}
		if p == nil || p.Digest != c.Previous {
			return Trace{Verdict: Unknown, At: c.PreviousGeneration, Named: c.Previous}, nil
		}
		c = p
	}
}

// Fork is a place where a spool holds two histories of one mesh: commit
// Generation names Named as the commit of generation At, but the spool's
// commit of At is Found (empty: the history passes over commit At, which
// the spool holds).
type Fork struct {
	Generation uint64 `json:"generation"`
	At         uint64 `json:"at"`
	Named      string `json:"named,omitempty"`
	Found      string `json:"found"`
}

func (f Fork) String() string {
	if f.Named == "" {
		return fmt.Sprintf("commit of generation %d passes over the spool's commit of generation %d (%s): two histories of this mesh were merged",
			f.Generation, f.At, ShortDigest(f.Found))
	}
	return fmt.Sprintf("commit of generation %d follows commit %s of generation %d, but the spool's commit of generation %d is %s: two histories of this mesh were merged",
		f.Generation, ShortDigest(f.Named), f.At, f.At, ShortDigest(f.Found))
}

// Forks reads every commit and returns the places where one names a
// commit the spool holds another of, or passes over one the spool holds.
func (h *History) Forks(ctx context.Context) ([]Fork, error) {
	var all []*Commit
	if err := h.Each(ctx, func(c *Commit) (bool, error) {
		all = append(all, c)
		return true, nil
	}); err != nil {
		return nil, err
	}
	return ForksOf(all), nil
}

// ForksOf finds the forks among verified commits, given in any order; they
// come out in order of generation.
func ForksOf(commits []*Commit) []Fork {
	sorted := slices.Clone(commits)
	slices.SortFunc(sorted, func(a, b *Commit) int { return cmp.Compare(a.Generation, b.Generation) })
	var forks []Fork
	for i, c := range sorted {
		if c.Previous == "" {
			continue
		}
		// The newest commit older than c: the one c follows, or one its
		// history passed over.
		j, found := slices.BinarySearchFunc(sorted[:i], c.PreviousGeneration, func(a *Commit, g uint64) int { return cmp.Compare(a.Generation, g) })
		switch {
		case j < i-1 || (j == i-1 && !found):
			// A verified commit between the two belongs to another
			// history.
			p := sorted[i-1]
			forks = append(forks, Fork{Generation: c.Generation, At: p.Generation, Found: p.Digest})
		case found && sorted[j].Digest != c.Previous:
			p := sorted[j]
			forks = append(forks, Fork{Generation: c.Generation, At: p.Generation, Named: c.Previous, Found: p.Digest})
		}
	}
	return forks
}
