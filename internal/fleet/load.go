// Package fleet owns the mesh's reading of every host's reports into who
// applied a generation, who failed it and why, and who is simply
// outstanding: loading them from the spool, the report cache that spares
// reading them again, the views with their JSON document and rollout page
// (html.go), and the newest recovery copy of each node, which declare hands
// on to a host that lost its state.
package fleet

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// Options tune Load.
type Options struct {
	// CacheDir holds the report cache (one file per spool, see
	// CachePath). Empty means no cache: every object is read from the
	// spool and nothing is kept.
	CacheDir string
	// Workers is how many objects are read and decoded at once. Zero
	// means twice the usable CPUs: decoding keeps the CPUs busy while
	// other workers wait on the spool.
	Workers int
	// NoBriefings loads the commits and reports alone, for a caller
	// that needs only the recovery copies (declare, which has read the
	// briefings through the registry already): the briefings are
	// neither listed nor read, and the cache keeps what it knew of them
	// for the next full load. Ask such a state only for RecoveryCopies
	// and SupersededReports: its views would show the briefings as the
	// cache last knew them.
	NoBriefings bool
}

// Stats say what a Load (and the calls after it) read from the spool, as
// opposed to what came from the cache.
type Stats struct {
	Reports       int // report objects listed
	Dirs          int // node directories listed (report/<id>/, brief/<id>/)
	DirsRead      int // of them, those read: the rest were as the cache knew them
	ReportsRead   int // report objects read and decoded
	Briefings     int // newest briefings of trusted identities
	BriefingsRead int
	LedgersRead   int // reports read again only for their recovery copy
	Commits       int
	CommitsRead   int
	ManifestsRead int
}

// State is the mesh's reading of the spool: every committed generation,
// every report and the newest briefing of every trusted identity, verified
// against the registry it was loaded with. It answers which nodes applied,
// failed or are outstanding on a generation (Generation, History) and
// holds the recovery copies declare hands back to hosts (RecoveryCopies).
// A State is not safe for concurrent use.
type State struct {
	mesh    *mesh.Mesh
	reg     *enrol.Registry
	cache   *cacheData
	path    string
	dirty   bool
	strIdx  map[string]uint32
	workers int
	briefs  bool     // whether briefings are loaded (not Options.NoBriefings)
	gens    []uint64 // committed generations, oldest first
	unknown []Object // reports filed under node ids no identity has
	// Warnings are what did not stop the load but the operator should
	// know: a cache rebuilt, a commit or manifest that was refused, a
	// fork.
	Warnings []string
	// Forks are the places where the spool holds two histories of the
	// mesh (see generation.Fork).
	Forks []generation.Fork
	Stats Stats
}

func (s *State) warnf(format string, args ...any) {
	s.Warnings = append(s.Warnings, fmt.Sprintf(format, args...))
}

// Load reads what is new in the spool since the cache was written and
// returns the state. reg is the registry after admission (enrol.Admit):
// reports are verified against its identities, and trust — which
// identities are revoked — is always taken from it, never from the cache.
// Load writes the cache back when it learned something.
func Load(ctx context.Context, m *mesh.Mesh, reg *enrol.Registry, o Options) (*State, error) {
	return Start(ctx, m, o).Finish(reg)
}

// Loading is a Load begun before the registry is at hand: the cache is
// read and the spool listed while the caller loads the registry, which
// the rest of the load needs. Finish it with the registry, or Abandon it.
type Loading struct {
	s      *State
	l      *listing
	ctx    context.Context
	cancel context.CancelFunc
	cached chan struct{} // closed once the cache is read
}

// Start begins a Load; see Loading.
func Start(ctx context.Context, m *mesh.Mesh, o Options) *Loading {
	s := &State{mesh: m, workers: o.Workers, briefs: !o.NoBriefings}
	if s.workers <= 0 {
		s.workers = 2 * runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	ld := &Loading{s: s, l: startListing(ctx, m.Spool, s.briefs), ctx: ctx, cancel: cancel, cached: make(chan struct{})}
	go func() {
		defer close(ld.cached)
		s.openCache(o.CacheDir)
		ld.l.setNodes(s.cache.Nodes)
	}()
	return ld
}

// Finish completes the load with reg, as Load does.
func (ld *Loading) Finish(reg *enrol.Registry) (*State, error) {
	defer ld.Abandon()
	<-ld.cached
	ld.s.reg = reg
	if err := ld.s.read(ld.ctx, ld.l); err != nil {
		return nil, err
	}
	return ld.s, nil
}

// Abandon stops a load that will not be finished, and waits for what it
// started. After Finish it does nothing more.
func (ld *Loading) Abandon() {
	ld.cancel()
	<-ld.cached
	ld.l.wait()
}

// openCache reads the report cache in dir (none if dir is empty), or
// starts a new one.
func (s *State) openCache(dir string) {
	spoolName, meshFP := s.mesh.Spool.String(), s.mesh.Public().Fingerprint()
	if dir != "" {
		s.path = CachePath(dir, spoolName)
		c, err := readCache(s.path, spoolName, meshFP)
		switch {
		case err == nil:
			s.cache = c
			if c.Version != cacheVersion {
				c.Version = cacheVersion // written again in this muster's format
				s.dirty = true
			}
		case errors.Is(err, errNoCache):
			s.warnf("no report cache at %s yet: reading every report in spool %s", s.path, spoolName)
		default:
			s.warnf("report cache %s: %v: rebuilding it from spool %s", s.path, err, spoolName)
		}
	}
	if s.cache == nil {
		s.cache = newCache(spoolName, meshFP)
		s.dirty = true
	}
	s.strIdx = make(map[string]uint32, len(s.cache.Strings))
	for i, str := range s.cache.Strings {
		s.strIdx[str] = uint32(i)
	}
}

// listing is the spool's reports and briefings, listed while the rest of
// a load goes on: listing a directory spool is mostly system calls, a
// few per node, which other CPUs make while this one reads the cache and
// the commits. A node's directory whose stamp is the one the cache holds
// is not read at all: its names are the ones the cache has (see
// spool.ListDirs).
type listing struct {
	wg sync.WaitGroup
	// nodes are the cache's facts, once ready is closed.
	ready chan struct{}
	nodes map[string]*nodeFacts
	// reports are listed in chunks, copied once into one array when the
	// listing is done: a spool of a million reports lists them on every
	// run, and growing one array would copy it over and over.
	reports [][]listed
	// same are the node ids whose report directories are as the cache
	// knows them: their reports are the cached facts, not listed again.
	same   []string
	briefs map[string]listed // the newest briefing of each node id
	// reportDirs and briefDirs are the stamps of the node ids'
	// directories listed.
	reportDirs, briefDirs map[string]spool.DirStamp
	briefsListed          bool   // false: briefs and briefDirs stay empty
	dirs, dirsRead        [2]int // directories listed and read, of reports and briefings
	errs                  [2]error
}

// startListing lists sp's reports, and its briefings if briefs, in the
// background; the caller hands it the cache's facts with setNodes, and wait
// returns what was listed.
func startListing(ctx context.Context, sp spool.Spool, briefs bool) *listing {
	l := &listing{ready: make(chan struct{}), briefsListed: briefs}
	// cached returns the facts of the node id whose directory below
	// prefix is dir, if its stamp is the one recorded with them.
	cached := func(prefix, dir string, st spool.DirStamp, stamp func(*nodeFacts) spool.DirStamp) *nodeFacts {
		if !l.await(ctx) {
			return nil
		}
		nf := l.nodes[dir[len(prefix):len(dir)-1]]
		if nf == nil || stamp(nf) != st {
			return nil
		}
		return nf
	}
	reportDir := func(nf *nodeFacts) spool.DirStamp { return nf.ReportDir }
	briefDir := func(nf *nodeFacts) spool.DirStamp { return nf.BriefDir }
	l.wg.Go(func() {
		var last []listed
		add := func(it listed) {
			if len(last) == cap(last) {
				last = make([]listed, 0, 4096)
				l.reports = append(l.reports, nil)
			}
			last = append(last, it)
			l.reports[len(l.reports)-1] = last
		}
		l.errs[0] = spool.ListDirs(ctx, sp, spool.ReportPrefix, func(dir string, st spool.DirStamp) bool {
			return cached(spool.ReportPrefix, dir, st, reportDir) != nil
		}, func(d spool.DirListing) error {
			if !l.await(ctx) {
				return ctx.Err()
			}
			l.dirs[0]++
			nodeID := d.Dir[len(spool.ReportPrefix) : len(d.Dir)-1]
			l.reportDirs[nodeID] = d.Stamp
			if d.Known {
				l.same = append(l.same, nodeID)
				return nil
			}
			l.dirsRead[0]++
			for k, name := range d.Names {
				id, gen, seq, err := spool.ParseReportName(name)
				if err != nil || id != nodeID {
					continue // spool verify reports strays
				}
				add(listed{nodeID, gen, seq, sizeListed(d, k)})
			}
			return nil
		})
	})
	if !briefs {
		return l
	}
	l.wg.Go(func() {
		l.errs[1] = spool.ListDirs(ctx, sp, spool.BriefPrefix, func(dir string, st spool.DirStamp) bool {
			return cached(spool.BriefPrefix, dir, st, briefDir) != nil
		}, func(d spool.DirListing) error {
			if !l.await(ctx) {
				return ctx.Err()
			}
			l.dirs[1]++
			nodeID := d.Dir[len(spool.BriefPrefix) : len(d.Dir)-1]
			l.briefDirs[nodeID] = d.Stamp
			if d.Known {
				if nf := l.nodes[nodeID]; nf.Briefed {
					l.briefs[nodeID] = listed{nodeID, 0, nf.BriefSeq, -1}
				}
				return nil
			}
			l.dirsRead[1]++
			for k, name := range d.Names {
				id, seq, err := spool.ParseBriefName(name)
				if err != nil || id != nodeID {
					continue // spool verify reports strays
				}
				if n, ok := l.briefs[nodeID]; !ok || seq > n.seq {
					l.briefs[nodeID] = listed{nodeID, 0, seq, sizeListed(d, k)}
				}
			}
			return nil
		})
	})
	return l
}

// sizeListed is the size of d's object k, -1 if the listing gave none.
func sizeListed(d spool.DirListing, k int) int64 {
	if d.Sizes == nil {
		return -1
	}
	return d.Sizes[k]
}

// setNodes hands the listing the cache's facts, which it reads but never
// changes until wait returns.
func (l *listing) setNodes(nodes map[string]*nodeFacts) {
	l.nodes = nodes
	// As many directories as the cache knows nodes, most of the time.
	l.reportDirs = make(map[string]spool.DirStamp, len(nodes))
	l.briefDirs = make(map[string]spool.DirStamp, len(nodes))
	l.briefs = make(map[string]listed, len(nodes))
	close(l.ready)
}

// await waits for setNodes, and reports false if ctx ended first.
func (l *listing) await(ctx context.Context) bool {
	select {
	case <-l.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// wait waits for the listing to finish and returns its first error.
func (l *listing) wait() error {
	l.wg.Wait()
	if l.errs[0] != nil {
		return l.errs[0]
	}
	return l.errs[1]
}

// stamp records in the cache the stamps of the directories listed, for
// the nodes whose facts were just made to match them; a node whose
// directory was not listed has none. Without the briefings listed, what
// the cache knew of them stays.
func (l *listing) stamp(s *State) {
	for nodeID, nf := range s.cache.Nodes {
		rd, bd := l.reportDirs[nodeID], l.briefDirs[nodeID]
		n, briefed := l.briefs[nodeID]
		if !l.briefsListed {
			bd, briefed, n.seq = nf.BriefDir, nf.Briefed, nf.BriefSeq
		}
		if nf.ReportDir != rd || nf.BriefDir != bd || nf.Briefed != briefed || nf.BriefSeq != n.seq {
			nf.ReportDir, nf.BriefDir, nf.Briefed, nf.BriefSeq = rd, bd, briefed, n.seq
			s.dirty = true
		}
	}
}

// allReports returns the reports listed, in name order, and lets go of
// the chunks they were listed in (40 MB at a million reports, which the
// collector would otherwise mark over and over while they are read).
func (l *listing) allReports() []listed {
	n := 0
	for _, c := range l.reports {
		n += len(c)
	}
	all := make([]listed, 0, n)
	for _, c := range l.reports {
		all = append(all, c...)
	}
	l.reports = nil
	return all
}

// read reads what is new in the spool into the cache, and writes the
// cache back when it learned something.
func (s *State) read(ctx context.Context, l *listing) error {
	if err := s.loadCommits(ctx); err != nil {
		return err
	}
	if err := s.checkHistory(ctx); err != nil {
		return err
	}
	if err := l.wait(); err != nil {
		return err
	}
	kept, err := s.loadReports(ctx, l.allReports(), l.same)
	if err != nil {
		return err
	}
	if s.briefs {
		if err := s.loadBriefings(ctx, l.briefs); err != nil {
			return err
		}
	}
	if err := s.loadLedgers(ctx, kept); err != nil {
		return err
	}
	l.stamp(s)
	s.Stats.Dirs, s.Stats.DirsRead = l.dirs[0]+l.dirs[1], l.dirsRead[0]+l.dirsRead[1]
	for id, nf := range s.cache.Nodes {
		if len(nf.Reports) == 0 && nf.Brief == nil {
			delete(s.cache.Nodes, id)
			s.dirty = true
		}
	}
	s.save()
	return nil
}

// save writes the cache if it changed. A cache that cannot be written is a
// warning: the next run reads more, nothing is wrong.
func (s *State) save() {
	if s.path == "" || !s.dirty {
		return
	}
	if err := writeCache(s.path, s.cache); err != nil {
		s.warnf("%v", err)
		return
	}
	s.dirty = false
}

// fatal reports whether err means the spool could not be read, as opposed
// to an object that is bad: the first stops the command, the second is
// recorded against the object.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) == fault.Temporary
}

// Newest returns the newest committed generation, 0 if none.
func (s *State) Newest() uint64 {
	if len(s.gens) == 0 {
		return 0
	}
	return s.gens[len(s.gens)-1]
}

// Committed lists the committed generations, oldest first.
func (s *State) Committed() []uint64 { return append([]uint64(nil), s.gens...) }

func (s *State) loadCommits(ctx context.Context) error {
	gens, err := generation.Committed(ctx, s.mesh.Spool)
	if err != nil {
		return err
	}
	signer := s.mesh.Pair.Sign.Public().(ed25519.PublicKey)
	// Commits are cached by generation: a spool restored from another
	// copy under the same name may hold other ones. When no commit is new,
	// the newest is read again, and if the spool no longer holds the one
	// cached, none is trusted. (A new commit is read anyway, and one that
	// does not follow the cached history is named as a fork.)
	if len(gens) > 0 {
		if f, ok := s.cache.Commits[gens[0]]; ok {
			c, err := generation.ReadCommit(ctx, s.mesh.Spool, gens[0], signer)
			if fatal(ctx, err) {
				return err
			}
			if c == nil || c.Digest != f.Digest {
				s.warnf("the commits in spool %s are not the ones the report cache holds (it was restored from another copy): reading them again", s.mesh.Spool)
				s.cache.Commits = map[uint64]commitFact{}
				s.cache.Manifests = map[uint64]manifestFact{}
				s.dirty = true
			}
		}
	}
	seen := make(map[uint64]bool, len(gens))
	for _, g := range gens {
		seen[g] = true
		if _, ok := s.cache.Commits[g]; ok {
			continue
		}
		c, err := generation.ReadCommit(ctx, s.mesh.Spool, g, signer)
		switch {
		case err == nil:
		case errors.Is(err, spool.ErrNotFound):
			delete(seen, g) // removed since it was listed
			continue
		case fatal(ctx, err):
			return err
		default:
			s.warnf("%s is skipped, it is not this mesh's: %v", spool.CommitName(g), err)
			delete(seen, g)
			continue
		}
		s.cache.Commits[g] = commitFact{Run: c.Run, DeclaredAt: c.DeclaredAt, Digest: c.Digest,
			Previous: c.Previous, PreviousGeneration: c.PreviousGeneration, ExpiresAt: c.ExpiresAt}
		s.Stats.CommitsRead++
		s.dirty = true
	}
	for g := range s.cache.Commits {
		if !seen[g] {
			delete(s.cache.Commits, g)
			s.dirty = true
		}
	}
	for g := range s.cache.Manifests {
		if _, ok := s.cache.Commits[g]; !ok {
			delete(s.cache.Manifests, g)
			s.dirty = true
		}
	}
	for g := range s.cache.Commits {
		s.gens = append(s.gens, g)
	}
	sort.Slice(s.gens, func(i, j int) bool { return s.gens[i] < s.gens[j] })
	s.Stats.Commits = len(s.gens)
	return nil
}

// checkHistory names the forks among the commits, and checks that the
// spool's history reaches the newest generation this mesh committed (see
// mesh.Head): a spool restored from an older copy, or another copy's
// history, is named, not silently reported on.
func (s *State) checkHistory(ctx context.Context) error {
	commits := make([]*generation.Commit, 0, len(s.cache.Commits))
	for g, f := range s.cache.Commits {
		commits = append(commits, &generation.Commit{Generation: g, Run: f.Run, DeclaredAt: f.DeclaredAt, Digest: f.Digest,
			Previous: f.Previous, PreviousGeneration: f.PreviousGeneration, ExpiresAt: f.ExpiresAt, Version: commitVersion(f)})
	}
	s.Forks = generation.ForksOf(commits)
	for _, f := range s.Forks {
		s.warnf("fork in spool %s: %s (muster spool verify lists it)", s.mesh.Spool, f)
	}
	head, err := s.mesh.Head()
	if err != nil {
		s.warnf("%v", err)
		return nil
	}
	if head == nil {
		return nil
	}
	hist := generation.HistoryOf(commits)
	newest, _ := hist.Newest(ctx)
	switch {
	case newest == nil || newest.Generation < head.Generation:
		s.warnf("spool %s is older than this mesh's history: this mesh committed generation %d (%s), and the spool's newest commit is older; sync the newer copy back into it",
			s.mesh.Spool, head.Generation, generation.ShortDigest(head.Commit))
		return nil
	}
	tr, err := hist.Trace(ctx, newest, head.Generation, head.Commit)
	if err != nil {
		return err
	}
	switch tr.Verdict {
	case generation.Diverges:
		s.warnf("spool %s holds another history of this mesh: its generation %d does not follow commit %s of generation %d, which this mesh committed",
			s.mesh.Spool, newest.Generation, generation.ShortDigest(head.Commit), head.Generation)
	case generation.Holds:
		if newest.Generation > head.Generation {
			_ = s.mesh.RecordHead(mesh.Head{Generation: newest.Generation, Commit: newest.Digest, CommittedAt: newest.DeclaredAt})
		}
	}
	return nil
}

// commitVersion is the version of a cached commit: only version 2 commits
// name the one they follow, so one without a predecessor after the first
// generation is from before muster kept a history.
func commitVersion(f commitFact) int {
	if f.Previous != "" {
		return generation.CommitVersion
	}
	return 1
}

// bound is the newest generation whose reports from id are usable: for a
// trusted identity the newest committed one; for a revoked identity the
// newest one committed before it was revoked, because nothing declared
// later was ever sealed to it, so a report of a later generation cannot be
// genuine.
func (s *State) bound(id *enrol.Identity) uint64 {
	if !id.Revoked() {
		return s.Newest()
	}
	var b uint64
	for _, g := range s.gens {
		if !s.cache.Commits[g].DeclaredAt.After(id.RevokedAt) {
			b = g
		}
	}
	return b
}

// usable reports whether a report may be counted (or give a recovery
// copy) for an identity whose bound is b.
func usable(f *reportFact, b uint64) bool {
	return f.err() == "" && f.misfiled() == "" && f.Gen <= b
}

// keptLedger is the ledger of the newest usable report decoded in this
// run, per node id, waiting to become the node's recovery candidate.
type keptLedger struct {
	gen, seq uint64
	json     []byte
}

// encodeLedger encodes a ledger for the cache.
func encodeLedger(entries []ledger.Entry) ([]byte, error) {
	if entries == nil {
		entries = []ledger.Entry{}
	}
	return json.Marshal(entries)
}

type listed struct {
	nodeID   string
	gen, seq uint64
	size     int64 // -1: not listed
}

// known reports whether the cache's facts are of exactly the reports
// listed.
func known(facts []reportFact, items []listed) bool {
	if len(facts) != len(items) {
		return false
	}
	for i, it := range items {
		if f := &facts[i]; f.Gen != it.gen || f.Seq != it.seq || !sameSize(f.Size, it.size) {
			return false
		}
	}
	return true
}

// sameSize reports whether a cached size matches a listed one; either is
// -1 when it was never listed (a briefing's size is known only from a
// listing).
func sameSize(cached, listed int64) bool { return listed < 0 || cached < 0 || cached == listed }

// loadReports reuses what the cache knows of the reports listed and reads
// the rest. unread are the node ids whose directories were not read, as
// the cache knows them: their reports are the cached facts' names.
func (s *State) loadReports(ctx context.Context, all []listed, unread []string) (map[string]*keptLedger, error) {
	s.Stats.Reports = len(all)
	// The listing is in name order, so each node's reports come together,
	// oldest first. byNode is sized for the nodes listed, none when
	// nothing is new, rather than for every node the cache knows.
	groups := 0
	for i := range all {
		if i == 0 || all[i].nodeID != all[i-1].nodeID {
			groups++
		}
	}
	byNode := make(map[string][]listed, groups)
	unchanged := make(map[string]bool, len(unread))
	for _, nodeID := range unread {
		nf := s.cache.Nodes[nodeID]
		s.Stats.Reports += len(nf.Reports)
		if id := s.reg.Identities[nodeID]; id != nil && id.Host.Sign == nf.Signer {
			unchanged[nodeID] = true // nothing new, the common case
			continue
		}
		// An identity no longer known, or verified against another
		// key: its reports go the long way, under the names cached.
		items := make([]listed, len(nf.Reports))
		for i, f := range nf.Reports {
			items[i] = listed{nodeID, f.Gen, f.Seq, -1}
		}
		byNode[nodeID] = items
	}
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].nodeID == all[i].nodeID {
			j++
		}
		if prev, ok := byNode[all[i].nodeID]; ok {
			byNode[all[i].nodeID] = append(prev, all[i:j]...) // prev's capacity ends with it
		} else {
			byNode[all[i].nodeID] = all[i:j:j]
		}
		i = j
	}
	type job struct {
		id   *enrol.Identity
		fact *reportFact
		b    uint64
	}
	var jobs []job
	for nodeID, items := range byNode {
		id := s.reg.Identities[nodeID]
		if id == nil {
			if _, ok := s.cache.Nodes[nodeID]; ok {
				delete(s.cache.Nodes, nodeID)
				s.dirty = true
			}
			for _, it := range items {
				s.unknown = append(s.unknown, Object{
					Name: spool.ReportName(nodeID, it.gen, it.seq), NodeID: nodeID, Generation: it.gen,
					Kind: RefusedUnknown, Reason: fmt.Sprintf("no identity %s was ever admitted", nodeID),
				})
			}
			continue
		}
		nf := s.node(id)
		old := nf.Reports
		if known(old, items) {
			continue // nothing new, the common case
		}
		facts := make([]reportFact, len(items))
		var fresh []int
		j := 0
		for i, it := range items {
			for j < len(old) && (old[j].Gen < it.gen || old[j].Gen == it.gen && old[j].Seq < it.seq) {
				j++
				s.dirty = true // gone from the spool
			}
			if j < len(old) && old[j].Gen == it.gen && old[j].Seq == it.seq && sameSize(old[j].Size, it.size) {
				facts[i] = old[j]
				j++
				continue
			}
			facts[i] = reportFact{Gen: it.gen, Seq: it.seq, Size: it.size}
			fresh = append(fresh, i)
		}
		if j < len(old) {
			s.dirty = true
		}
		nf.Reports = facts
		b := s.bound(id)
		for _, i := range fresh {
			jobs = append(jobs, job{id, &facts[i], b})
		}
	}
	for nodeID, nf := range s.cache.Nodes {
		if _, ok := byNode[nodeID]; !ok && !unchanged[nodeID] && len(nf.Reports) > 0 {
			nf.Reports = nil
			s.dirty = true
		}
	}
	sort.Slice(s.unknown, func(i, j int) bool { return s.unknown[i].Name < s.unknown[j].Name })
	if len(jobs) > 0 {
		s.dirty = true
	}
	s.Stats.ReportsRead = len(jobs)
	var mu sync.Mutex
	kept := map[string]*keptLedger{}
	// Identical ledgers are kept once until loadLedgers files them by
	// sum: nodes of one role own the same things, and a fleet's worth of
	// copies would otherwise be held through the whole read.
	same := map[[32]byte][]byte{}
	// Newest first: each node's reports are in its jobs oldest first, and
	// only the newest usable one's ledger is kept, so read from the end
	// the older ones rarely need theirs encoded.
	err := workpool.Run(ctx, len(jobs), s.workers, func(k int) error {
		jb := jobs[len(jobs)-1-k]
		f, entries, err := s.readReport(ctx, jb.id, jb.fact.Gen, jb.fact.Seq)
		if err != nil {
			return err
		}
		*jb.fact = f
		if f.Size < 0 || !usable(&f, jb.b) {
			return nil
		}
		mu.Lock()
		prev := kept[jb.id.NodeID]
		better := prev == nil || f.Gen > prev.gen || f.Gen == prev.gen && f.Seq > prev.seq
		mu.Unlock()
		if !better {
			return nil
		}
		// Encoded now, so the decoded report is not kept alive.
		data, err := encodeLedger(entries)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		mu.Lock()
		if prev := kept[jb.id.NodeID]; prev == nil || f.Gen > prev.gen || f.Gen == prev.gen && f.Seq > prev.seq {
			if d, ok := same[sum]; ok {
				data = d
			} else {
				same[sum] = data
			}
			kept[jb.id.NodeID] = &keptLedger{f.Gen, f.Seq, data}
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Drop reports that vanished between listing and reading.
	gone := map[string]bool{}
	for _, jb := range jobs {
		if jb.fact.Size < 0 {
			gone[jb.id.NodeID] = true
		}
	}
	for nodeID := range gone {
		nf := s.cache.Nodes[nodeID]
		nf.Reports = dropGone(nf.Reports)
	}
	return kept, nil
}

func dropGone(fs []reportFact) []reportFact {
	out := fs[:0]
	for _, f := range fs {
		if f.Size >= 0 {
			out = append(out, f)
		}
	}
	return out
}

// node returns the facts of identity id, starting afresh if they were
// verified against another key.
func (s *State) node(id *enrol.Identity) *nodeFacts {
	nf := s.cache.Nodes[id.NodeID]
	if nf == nil || nf.Signer != id.Host.Sign {
		nf = &nodeFacts{Signer: id.Host.Sign}
		s.cache.Nodes[id.NodeID] = nf
		s.dirty = true
	}
	return nf
}

// readReport reads one report and verifies it against id. A report that
// vanished is returned with Size -1; one that is refused carries the
// reason in Err. Only a spool that cannot be read is an error.
func (s *State) readReport(ctx context.Context, id *enrol.Identity, gen, seq uint64) (reportFact, []ledger.Entry, error) {
	name := spool.ReportName(id.NodeID, gen, seq)
	f := reportFact{Gen: gen, Seq: seq}
	data, err := s.mesh.Spool.Get(ctx, name, 0)
	switch {
	case err == nil:
	case errors.Is(err, spool.ErrNotFound):
		f.Size = -1
		return f, nil, nil
	case errors.Is(err, spool.ErrTooLarge):
		f.more().Err = err.Error()
		return f, nil, nil
	default:
		return f, nil, err
	}
	f.Size = int64(len(data))
	v, err := id.Host.Verifier()
	if err != nil {
		f.more().Err = fmt.Sprintf("identity %s of %s: %v", id.NodeID, id.Name, err)
		return f, nil, nil
	}
	c := report.Ctx(id.NodeID, gen, seq)
	p, err := bundle.Open(data, c, s.mesh.Pair.Age, v)
	if err != nil {
		f.more().Err = err.Error()
		return f, nil, nil
	}
	r, err := report.UnmarshalPayload(p, c)
	if err != nil {
		f.more().Err = err.Error()
		return f, nil, nil
	}
	if r.Version != report.FormatVersion {
		f.more().Err = fmt.Sprintf("report %s is in format version %d; this muster reads version %d", name, r.Version, report.FormatVersion)
		return f, nil, nil
	}
	var claims []string
	if r.Node != id.Name {
		claims = append(claims, "node "+r.Node)
	}
	if r.NodeID != id.NodeID {
		claims = append(claims, "node id "+r.NodeID)
	}
	if r.Generation != gen {
		claims = append(claims, fmt.Sprintf("generation %d", r.Generation))
	}
	if len(claims) > 0 {
		f.more().Misfiled = fmt.Sprintf("signed by %s (identity %s) for generation %d, but the report names %s", id.Name, id.NodeID, gen, strings.Join(claims, ", "))
	}
	f.Passed = outcome.Of(r.Lines) == outcome.Passed
	if failed := outcome.FailedLines(r.Lines); len(failed) > 0 {
		f.more().Failed = cloneLines(failed)
	}
	for _, n := range r.Notes {
		f.more().Notes = append(f.More.Notes, strings.Clone(n))
	}
	f.Start, f.End = unixNano(r.Start), unixNano(r.End)
	f.Muster, f.Commit = internReportString(r.Muster), internReportString(r.Commit)
	return f, r.Ledger, nil
}

// cloneLines copies lines out of a decoded document: decoded strings share
// the payload's memory, which would otherwise stay alive as long as the
// facts do.
func cloneLines(ls []outcome.Line) []outcome.Line {
	var out []outcome.Line
	for _, l := range ls {
		out = append(out, outcome.Line{ID: strings.Clone(l.ID), Status: outcome.Status(strings.Clone(string(l.Status))),
			Detail: strings.Clone(l.Detail), Digest: strings.Clone(l.Digest)})
	}
	return out
}

// loadBriefings reads the newest briefing of every trusted identity that
// the cache does not have.
func (s *State) loadBriefings(ctx context.Context, newest map[string]listed) error {
	// Every trusted identity in no order: sorting 100,000 by name for
	// this was a fifth of the loop.
	active := make(map[string]bool, len(s.reg.Nodes))
	type job struct {
		id   *enrol.Identity
		nf   *nodeFacts
		seq  uint64
		size int64
	}
	var jobs []job
	for _, node := range s.reg.Nodes {
		if decommissioned(node) {
			continue
		}
		id := node.Current
		active[id.NodeID] = true
		n, ok := newest[id.NodeID]
		if !ok {
			if nf := s.cache.Nodes[id.NodeID]; nf != nil && nf.Brief != nil {
				nf.Brief = nil
				s.dirty = true
			}
			continue
		}
		s.Stats.Briefings++
		nf := s.node(id)
		if nf.Brief != nil && nf.Brief.Seq == n.seq && sameSize(nf.Brief.Size, n.size) {
			continue
		}
		jobs = append(jobs, job{id, nf, n.seq, n.size})
	}
	for nodeID, nf := range s.cache.Nodes {
		if !active[nodeID] && nf.Brief != nil {
			nf.Brief = nil
			s.dirty = true
		}
	}
	if len(jobs) > 0 {
		s.dirty = true
	}
	s.Stats.BriefingsRead = len(jobs)
	return workpool.Run(ctx, len(jobs), s.workers, func(k int) error {
		jb := jobs[k]
		b, err := s.reg.OpenBriefing(ctx, s.mesh, jb.id.NodeID, jb.seq)
		switch {
		case err == nil:
			jb.nf.Brief = &briefFact{Seq: jb.seq, Size: jb.size, Time: unixNano(b.Time), Failed: cloneLines(outcome.FailedLines(b.Lines))}
		case errors.Is(err, spool.ErrNotFound):
			jb.nf.Brief = nil
		case fatal(ctx, err):
			return err
		default:
			// As for enrol list: a briefing that cannot be read or
			// verified makes the node ineligible, with the reason.
			jb.nf.Brief = &briefFact{Seq: jb.seq, Size: jb.size, Failed: []outcome.Line{
				{ID: "briefing", Status: outcome.Failed, Detail: err.Error()},
			}}
		}
		return nil
	})
}

// loadLedgers makes each node id's recovery candidate the ledger of its
// newest usable report, reading a report again only when the candidate
// moved to one whose ledger was not kept (a revocation or a new commit
// changed which reports are usable).
func (s *State) loadLedgers(ctx context.Context, kept map[string]*keptLedger) error {
	type job struct {
		id *enrol.Identity
		nf *nodeFacts
		f  reportFact
		b  uint64
	}
	var jobs []job
	for nodeID, nf := range s.cache.Nodes {
		id := s.reg.Identities[nodeID]
		if id == nil {
			continue
		}
		b := s.bound(id)
		best := newestUsable(nf.Reports, b)
		switch {
		case best == nil:
			if nf.Ledger != nil {
				nf.Ledger = nil
				s.dirty = true
			}
		case nf.Ledger != nil && nf.Ledger.Gen == best.Gen && nf.Ledger.Seq == best.Seq:
		case kept[nodeID] != nil && kept[nodeID].gen == best.Gen && kept[nodeID].seq == best.Seq:
			s.setLedger(nf, best.Gen, best.Seq, kept[nodeID].json)
			s.dirty = true
		default:
			jobs = append(jobs, job{id, nf, *best, b})
		}
	}
	if len(jobs) > 0 {
		s.dirty = true
	}
	s.Stats.LedgersRead = len(jobs)
	var mu sync.Mutex
	err := workpool.Run(ctx, len(jobs), s.workers, func(k int) error {
		jb := jobs[k]
		f, entries, err := s.readReport(ctx, jb.id, jb.f.Gen, jb.f.Seq)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if f.Size < 0 || !usable(&f, jb.b) {
			// Changed under us; the next run sorts it out.
			jb.nf.Ledger = nil
			return nil
		}
		data, err := encodeLedger(entries)
		if err != nil {
			return err
		}
		s.setLedger(jb.nf, f.Gen, f.Seq, data)
		return nil
	})
	if err != nil {
		return err
	}
	// Drop the ledgers no node refers to any more.
	used := map[[32]byte]bool{}
	for _, nf := range s.cache.Nodes {
		if nf.Ledger != nil {
			used[nf.Ledger.Sum] = true
		}
	}
	for sum := range s.cache.Ledgers {
		if !used[sum] {
			delete(s.cache.Ledgers, sum)
			s.dirty = true
		}
	}
	return nil
}

// setLedger makes the ledger data (JSON) nf's recovery candidate.
func (s *State) setLedger(nf *nodeFacts, gen, seq uint64, data []byte) {
	sum := sha256.Sum256(data)
	if _, ok := s.cache.Ledgers[sum]; !ok {
		s.cache.Ledgers[sum] = data
	}
	nf.Ledger = &ledgerRef{Gen: gen, Seq: seq, Sum: sum}
}

// newestUsable returns the newest report in fs (sorted by generation and
// sequence) usable under bound b.
func newestUsable(fs []reportFact, b uint64) *reportFact {
	for i := len(fs) - 1; i >= 0; i-- {
		if usable(&fs[i], b) {
			return &fs[i]
		}
	}
	return nil
}
