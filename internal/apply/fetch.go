package apply

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/spool"
)

// findGeneration returns the newest commit that verifies and has a bundle
// for this node, and the newest generation that verifies. Commits that do
// not verify are skipped (f.skipped), never obeyed. It refuses a rollback
// (a generation older than the one applied in st) and a fork: another
// commit of the generation applied, or a newer commit whose history does
// not hold the one applied (when that history is in the spool).
//
// A generation in skip is taken to have no declaration for this node (its
// declaration did not verify).
//
// Only the commits from the one applied on are listed, while the spool
// holds that one: none older can be applied. When the spool still holds the commit applied, unchanged (the
// listing shows the tag kept in st, or its digest is st.Commit), and
// cached has this node's declaration of it, that declaration is taken as
// it is (f.nd): no request is made for it.
func findGeneration(ctx context.Context, sp spool.Spool, nodeID string, meshSign ed25519.PublicKey, st *State, skip map[uint64]bool, cached func(name string) *generation.NodeDeclaration) (f fetch) {
	hist, err := generation.LoadHistoryFrom(ctx, sp, meshSign, st.Generation, st.known())
	if err == nil && st.Generation > 0 && !slices.Contains(hist.Listed(), st.Generation) {
		// The commit applied is gone: a rollback, a spool that is not
		// mounted, or a partial copy. Refused below; the whole listing
		// says what the spool holds instead.
		hist, err = generation.LoadHistory(ctx, sp, meshSign)
	}
	if err != nil {
		f.err = err
		return f
	}
	defer func() { f.skipped = hist.Skipped }()
	last := st.Generation
	var chosen *generation.Commit
	f.err = hist.Each(ctx, func(c *generation.Commit) (bool, error) {
		if f.newest == 0 {
			f.newest = c.Generation
			if c.Generation < last {
				return false, fault.WithHint(fault.Refusedf("rollback refused: the newest commit in spool %s is generation %d, older than generation %d, which this host already applied", sp, c.Generation, last),
					"if the spool was restored from an old copy, sync the newer objects back into it")
			}
		}
		if c.Generation == last && !st.applied(c) {
			return false, forkRefused(sp, fmt.Sprintf("the spool's commit of generation %d is %s, not %s, which this host applied", last, generation.ShortDigest(c.Digest), st.commitName()))
		}
		if c.Generation == last && st.Commit != "" && !skip[last] && cached != nil {
			if nd := cached(spool.DeclName(c.Generation, c.Run, nodeID)); nd != nil {
				chosen, f.nd = c, nd
				return false, nil
			}
		}
		// Read, not asked about: the declaration of the generation
		// chosen is read next, and a GET of an object that is not there
		// costs what a HEAD does.
		var data []byte
		err := spool.ErrNotFound
		if !skip[c.Generation] {
			data, err = sp.Get(ctx, spool.DeclName(c.Generation, c.Run, nodeID), 0)
		}
		switch {
		case errors.Is(err, spool.ErrNotFound):
			// Nothing for this node in c; an older one may have something,
			// but never one older than what it applied.
			return c.Generation > last, nil
		case err != nil:
			return false, err
		case c.Generation < last:
			return false, fault.Refusedf("rollback refused: the newest generation in spool %s with a declaration for this node is generation %d, older than generation %d, which this host already applied", sp, c.Generation, last)
		}
		chosen, f.data = c, data
		return false, nil
	})
	if fault.ClassOf(f.err) == fault.Refused || f.err == nil && (f.newest < last || f.newest == 0) {
		// What looks like a rollback, or like a mesh that declared
		// nothing yet, may be a spool that is not there: an unmounted
		// stick or bind mount leaves an empty directory. A spool
		// without the mesh's keys is not the mesh's spool.
		if err := meshKeysThere(ctx, sp); err != nil {
			f.err = fmt.Errorf("%w; nothing was changed", err)
			return f
		}
	}
	if f.err != nil {
		return f
	}
	if chosen == nil {
		if last == 0 {
			return f
		}
		// The commit of the generation applied may still be there, with no
		// declaration for this node any more: nothing is declared for it,
		// which is no rollback. Only a generation gone from the spool is.
		c, err := hist.Commit(ctx, last)
		switch {
		case err != nil:
			f.err = err
		case c == nil:
			f.err = fault.Refusedf("rollback refused: generation %d, which this host applied, is no longer in spool %s and no newer one is declared for it", last, sp)
		default:
			f.notes = append(f.notes, fmt.Sprintf("generation %d, which this host applied, holds no declaration for it any more (spool gc removed it, or the host was enrolled again); nothing newer is declared for it", last))
		}
		return f
	}
	if chosen.Generation > last && st.Commit != "" {
		tr, err := hist.Trace(ctx, chosen, last, st.Commit)
		if err != nil {
			f.err = err
			return f
		}
		if tr.Verdict == generation.Diverges {
			what := "passes over it"
			if tr.Named != "" {
				what = "holds " + generation.ShortDigest(tr.Named) + " there"
			}
			f.err = forkRefused(sp, fmt.Sprintf("the history of generation %d (%s) does not hold generation %d as this host applied it (%s): it %s",
				chosen.Generation, generation.ShortDigest(chosen.Digest), last, st.commitName(), what))
			return f
		}
	}
	f.gen, f.commit, f.etag = chosen.Generation, chosen, hist.ETag(chosen.Generation)
	return f
}

// meshKeysThere fails, as a temporary failure, when sp holds no mesh keys:
// it is not (yet) the mesh's spool, such as the empty mount point of a
// stick that is not mounted.
func meshKeysThere(ctx context.Context, sp spool.Spool) error {
	_, err := sp.Stat(ctx, spool.MeshKeysName)
	if errors.Is(err, spool.ErrNotFound) {
		return fault.WithHint(fault.New(fault.Temporary, &notThereError{sp}),
			"mount the disk or share that holds the spool, or check the spool in the host config")
	}
	return err
}

// notThereError is a spool that holds no mesh keys. It matches
// spool.ErrUnavailable: trying later, once it is mounted, may work.
type notThereError struct{ sp spool.Spool }

func (e *notThereError) Error() string {
	return fmt.Sprintf("spool %s holds no mesh keys (%s): it is not mounted, or not the mesh's spool", e.sp, spool.MeshKeysName)
}

func (e *notThereError) Is(target error) bool { return target == spool.ErrUnavailable }

// localSpool is a spool kept in a directory of this machine (spool.Dir).
type localSpool interface{ Path() string }

// putReport puts a report (or an earlier one from the outbox) into sp.
// A directory spool can go away under a run, or between runs: a stick
// pulled out, a share or bind mount unmounted, which leaves an empty
// directory that a Put would fill, and a report "sent" there never reaches
// the mesh while its outbox copy is gone. So a directory spool is checked
// to hold the mesh's keys first (a stat of one local file). An object
// store cannot turn into an empty directory, and is not asked: a run
// costs it no request more.
func putReport(ctx context.Context, sp spool.Spool, name string, data []byte) error {
	if _, local := sp.(localSpool); local {
		if err := meshKeysThere(ctx, sp); err != nil {
			return err
		}
	}
	return spool.PutNew(ctx, sp, name, data)
}

// forkRefused is the refusal of a commit from another history of the mesh
// than the one this host applied.
func forkRefused(sp spool.Spool, what string) error {
	return fault.WithHint(fault.Refusedf("fork refused: %s; spool %s holds another history of this mesh", what, sp),
		"the spool was restored from an older copy and declared on, or two copies grew apart: the mesh's operator should sync the copy this host applied from back into the spool (muster spool verify names the fork); "+
			"if the mesh has settled on the spool's history, reset this host's state as muster-apply(1) says under STATE")
}

// fetch is what fetchNewest found: the generation to apply (0: none), its
// commit and this node's declaration, the newest generation that
// verifies, and the commits skipped because they do not.
type fetch struct {
	gen, newest uint64
	commit      *generation.Commit
	// etag is the store's tag of the commit's object, as listed.
	etag string
	// data is this node's declaration object of gen, as read while
	// looking for it; nil when nd came from the declaration cache.
	data []byte
	nd   *generation.NodeDeclaration
	// decoded: nd was decoded from the spool's object, not taken from
	// the declaration cache, which holds only declarations that passed
	// checkDeclaration; sum is the sha256 of the object, which the
	// cache is written under once nd passes it too.
	decoded bool
	sum     [32]byte
	skipped []generation.Skipped
	// junk are this node's declarations that did not verify, skipped.
	junk []string
	// notes say why nothing is declared, when that needs saying.
	notes []string
	err   error
}

// fetchNewest finds the generation to apply after the one in st and
// fetches this node's declaration of it.
//
// A declaration that does not verify (signed by another key, sealed to
// another node, bound to another name) is junk anyone able to write to the
// spool could have left there: it is skipped, and the newest generation
// before it with a declaration for this node is taken instead, with the
// same rollback and fork rules. The declaration of the generation this host
// applied is the exception: it verified before, so one that does not now
// was changed in place, and is refused.
func fetchNewest(ctx context.Context, o Options, meshSign ed25519.PublicKey, nodeID string, st *State) fetch {
	skip := map[uint64]bool{}
	var junk []string
	cached := func(name string) *generation.NodeDeclaration {
		nd, _, ok := loadCachedDeclaration(o.Config.State, o.Identity.Pair.Sign, name, o.Version)
		if !ok {
			return nil
		}
		return nd
	}
	for {
		f := findGeneration(ctx, o.Spool, nodeID, meshSign, st, skip, cached)
		f.junk = junk
		if f.err == nil && f.gen < f.newest {
			// The newest generation has nothing for this node: it may
			// have been revoked, which the mesh tells it in a record
			// sealed to it. Asked only then, so a node the newest
			// generation names costs no request for it.
			f.err = revoked(ctx, o)
		}
		if f.err != nil || f.gen == 0 || f.nd != nil {
			return f
		}
		f.nd, f.decoded, f.sum, f.err = fetchDeclaration(ctx, o, meshSign, f.gen, f.commit.Run, nodeID, f.data)
		f.data = nil
		if f.err == nil || fault.ClassOf(f.err) != fault.Refused {
			return f
		}
		if f.gen == st.Generation {
			// The declaration this host applied was there and verified;
			// one that does not verify now was changed in place, which
			// no writer to a spool can do (objects are write-once): the
			// store was tampered with. Refused, not passed over.
			return f
		}
		skip[f.gen] = true
		junk = append(junk, f.err.Error())
	}
}

// revoked refuses the run of a host whose identity the mesh revoked.
func revoked(ctx context.Context, o Options) error {
	rv, err := host.ReadRevocation(ctx, o.Spool, o.Identity)
	if err != nil || rv == nil {
		return err
	}
	return fault.WithHint(fault.Refusedf("this host's identity %s (node %s) was revoked at %s: %s; it changes nothing any more",
		rv.NodeID, rv.Name, rv.RevokedAt.UTC().Format(time.RFC3339), rv.Reason),
		"if the host should stay, ask the operator for a re-enrolment token (muster enrol issue "+rv.Name+" --reenrol) and run muster enrol join --force with it")
}

// fetchDeclaration verifies the mesh's signature on this node's
// declaration of generation gen (data: the object's bytes, read when nil)
// and decrypts it, or takes it from the declaration cache when the
// object's bytes are the ones verified before. decoded says which, and
// sum is the sha256 of the object's bytes.
func fetchDeclaration(ctx context.Context, o Options, meshSign ed25519.PublicKey, gen uint64, run, nodeID string, data []byte) (nd *generation.NodeDeclaration, decoded bool, sum [32]byte, err error) {
	name := spool.DeclName(gen, run, nodeID)
	if data == nil {
		if data, err = o.Spool.Get(ctx, name, 0); err != nil {
			return nil, false, sum, err
		}
	}
	sum = sha256.Sum256(data)
	nd, csum, cached := loadCachedDeclaration(o.Config.State, o.Identity.Pair.Sign, name, o.Version)
	if cached = cached && csum == sum; !cached {
		nd = new(generation.NodeDeclaration)
		if err := bundle.OpenTOML(data, generation.DeclCtx(gen, run, nodeID), o.Identity.Pair.Age, meshSign, nd); err != nil {
			return nil, false, sum, fault.New(fault.Refused, fmt.Errorf("declaration %s refused: %w", name, err))
		}
	}
	if nd.NodeID != nodeID || nd.Generation != gen || nd.Run != run {
		return nil, false, sum, fault.Refusedf("declaration %s refused: it is addressed to node %s, generation %d", name, nd.NodeID, nd.Generation)
	}
	return nd, !cached, sum, nil
}
