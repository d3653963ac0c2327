package enrol

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/hugepage"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// Identity is one admitted host identity.
type Identity struct {
	NodeID     string
	Name       string
	Host       keys.Public
	Labels     map[string]string
	AdmittedAt time.Time
	TokenID    string
	// RevokedAt is zero while the identity is trusted.
	RevokedAt    time.Time
	RevokeReason string
}

// Revoked reports whether the identity is refused.
func (id *Identity) Revoked() bool { return !id.RevokedAt.IsZero() }

// Node is a node name with its current identity (revoked once the node is
// decommissioned) and the identities it had before.
type Node struct {
	Name    string
	Current *Identity
	Past    []*Identity
}

// Registry is who is trusted, computed from the spool's enrolment records.
type Registry struct {
	// Issued holds the token records read so far, by token id. Only
	// admission needs them, so LoadRegistry leaves it empty and Admit
	// reads the ones its pending join requests name: from the mesh
	// directory's journal of the tokens it issued, or else from the
	// spool.
	Issued     map[string]*Issued
	Admitted   map[string]*Admission // by token id
	Refused    map[string]*Refusal   // by token id + "/" + host fingerprint
	Identities map[string]*Identity  // by node id
	Nodes      map[string]*Node      // by name

	// Skipped names the enrolment records that did not verify against
	// the mesh key (signed by another key, damaged), with why: junk anyone
	// able to write to the spool could have dropped, skipped and never
	// trusted. A token whose record is junk counts as never issued.
	Skipped []string

	// revocations are the revocation records read, by node id.
	revocations map[string]*Revocation
	// labelChanges are the label changes read, by node id, and by name
	// so that a refresh reads each once.
	labelChanges map[string][]*LabelChange
	labelsRead   map[string]bool
	// junk are the records skipped, so that a refresh reads them once.
	junk map[string]bool
	// journalRead is set once the journal of issued tokens is in Issued.
	journalRead bool

	// Warnings are what did not stop loading the registry but the
	// operator should know: a registry cache that could not be used or
	// written (see cache.go).
	Warnings []string
	// cache is the registry cache LoadRegistry read, used by the first
	// refresh only. records are the records read or taken from it since,
	// and joinDirs the directories of join requests known to hold only
	// decided ones (see pendingByToken): what the cache is written with,
	// at cachePath, when cacheStale.
	cache      *registryCache
	records    map[string]cachedRecord
	joinDirs   map[string]joinDir
	cachePath  string
	cacheStale bool
}

// cached returns the record the registry cache holds for the object i
// listed, taking it into the records to keep.
func (r *Registry) cached(i spool.Info) (cachedRecord, bool) {
	if r.cache == nil {
		return cachedRecord{}, false
	}
	c, ok := r.cache.Records[i.Name]
	if !ok || i.Size >= 0 && c.Size >= 0 && i.Size != c.Size {
		return cachedRecord{}, false
	}
	r.records[i.Name] = c
	return c, true
}

// keep keeps for the cache a record the registry holds already, listed
// again: one this process wrote (admit's decisions), which it did not
// read back.
func (r *Registry) keep(name string, c cachedRecord) {
	if _, ok := r.records[name]; !ok {
		r.remember(name, c)
	}
}

// remember keeps a record just read and verified, for the cache. It is
// called under the lock of the reading in progress.
func (r *Registry) remember(name string, c cachedRecord) {
	if r.records == nil {
		r.records = map[string]cachedRecord{}
	}
	r.records[name] = c
	r.cacheStale = true
}

// saveCache writes the registry cache when the records differ from what
// it held. A cache that cannot be written is a warning: the next run reads
// more, nothing is wrong.
func (r *Registry) saveCache(m *mesh.Mesh) {
	if r.cache != nil && len(r.records) != len(r.cache.Records) {
		r.cacheStale = true // some are gone from the spool
	}
	r.cache = nil
	if r.cachePath == "" || !r.cacheStale {
		return
	}
	c := &registryCache{Spool: m.Spool.String(), Mesh: m.Public().Fingerprint(), Records: r.records, JoinDirs: r.joinDirs}
	if err := writeRegistryCache(r.cachePath, c); err != nil {
		r.Warnings = append(r.Warnings, err.Error())
		return
	}
	r.cacheStale = false
}

// skip records that the record name did not verify.
func (r *Registry) skip(mu *sync.Mutex, name string, err error) {
	mu.Lock()
	defer mu.Unlock()
	if r.junk == nil {
		r.junk = map[string]bool{}
	}
	if !r.junk[name] {
		r.junk[name] = true
		r.Skipped = append(r.Skipped, fmt.Sprintf("%s skipped: %v (it is not this mesh's)", name, err))
	}
}

// JoinDecision returns what decided the join request host hostFP made
// with token tokenID: the admission of that host, or the refusal of that
// request. Both are nil while the request is pending. A decided request
// is never decided again, so no reader needs it any more.
func (r *Registry) JoinDecision(tokenID, hostFP string) (*Admission, *Refusal) {
	if a := r.Admitted[tokenID]; a != nil && a.NodeID == hostFP {
		return a, nil
	}
	return nil, r.Refused[tokenID+"/"+hostFP]
}

// Active returns the trusted current identities, sorted by name.
func (r *Registry) Active() []*Identity {
	var out []*Identity
	for _, n := range r.Nodes {
		if n.Current != nil && !n.Current.Revoked() {
			out = append(out, n.Current)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns every node name ever enrolled, sorted.
func (r *Registry) Names() []string {
	var out []string
	for n := range r.Nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Enrolled reports whether name has a trusted identity now.
func (r *Registry) Enrolled(name string) *Identity {
	if n := r.Nodes[name]; n != nil && n.Current != nil && !n.Current.Revoked() {
		return n.Current
	}
	return nil
}

// LoadRegistry reads the spool's admissions, revocations and refusals and
// computes who is trusted.
func LoadRegistry(ctx context.Context, m *mesh.Mesh) (*Registry, error) {
	return loadRegistry(ctx, m, true)
}

// ReadRegistry is LoadRegistry for a command that changes nothing, the
// mesh directory's caches included (shell completion): it reads the
// registry cache and the records written since, and writes no cache.
func ReadRegistry(ctx context.Context, m *mesh.Mesh) (*Registry, error) {
	return loadRegistry(ctx, m, false)
}

func loadRegistry(ctx context.Context, m *mesh.Mesh, keep bool) (*Registry, error) {
	r := &Registry{
		Issued:      map[string]*Issued{},
		Admitted:    map[string]*Admission{},
		Refused:     map[string]*Refusal{},
		Identities:  map[string]*Identity{},
		Nodes:       map[string]*Node{},
		revocations: map[string]*Revocation{},
		records:     map[string]cachedRecord{},
		cachePath:   RegistryCachePath(m.Dir, m.Spool.String()),
	}
	c, err := readRegistryCache(r.cachePath, m.Spool.String(), m.Public().Fingerprint())
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("registry cache %s: %v: reading the enrolment records in spool %s again", r.cachePath, err, m.Spool))
	}
	r.cache = c
	if !keep {
		r.cachePath = "" // saveCache writes nothing
	}
	if c == nil {
		r.cacheStale = true
	} else {
		// Sized for what the cache holds, most of which a run keeps.
		r.joinDirs = c.JoinDirs
		r.records = make(map[string]cachedRecord, len(c.Records))
		r.Admitted = make(map[string]*Admission, len(c.Records))
	}
	if err := r.refresh(ctx, m); err != nil {
		return nil, err
	}
	return r, nil
}

// refresh reads the enrolment records written since r was last read
// (records are immutable, so the ones already read stay as they are) and
// recomputes the identities.
func (r *Registry) refresh(ctx context.Context, m *mesh.Mesh) error {
	signer := m.Pair.Sign.Public().(ed25519.PublicKey)
	var mu sync.Mutex
	junk := func(name string, err error) { r.skip(&mu, name, err) }
	fresh := func(name string) bool { mu.Lock(); defer mu.Unlock(); return !r.junk[name] }
	err := eachObject(ctx, m.Spool, spool.EnrolAdmitPrefix, func(i spool.Info) bool {
		id := strings.TrimPrefix(i.Name, spool.EnrolAdmitPrefix)
		if a := r.Admitted[id]; a != nil {
			r.keep(i.Name, cachedRecord{Size: -1, Admission: a})
			return false
		}
		if !fresh(i.Name) {
			return false
		}
		if c, ok := r.cached(i); ok && c.Admission != nil {
			r.Admitted[id] = c.Admission
			return false
		}
		return true
	}, func(name string, data []byte) error {
		id := strings.TrimPrefix(name, spool.EnrolAdmitPrefix)
		var a Admission
		if err := bundle.OpenTOML(data, admitCtx(id), m.Pair.Age, signer, &a); err != nil {
			return err
		}
		if a.TokenID != id {
			return fmt.Errorf("admission names token %s", a.TokenID)
		}
		mu.Lock()
		r.Admitted[id] = &a
		r.remember(name, cachedRecord{Size: int64(len(data)), Admission: &a})
		mu.Unlock()
		return nil
	}, junk)
	if err != nil {
		return err
	}
	err = eachObject(ctx, m.Spool, spool.EnrolRefusedPrefix, func(i spool.Info) bool {
		rest := strings.TrimPrefix(i.Name, spool.EnrolRefusedPrefix)
		if rf := r.Refused[rest]; rf != nil {
			r.keep(i.Name, cachedRecord{Size: -1, Refusal: rf})
			return false
		}
		if !fresh(i.Name) {
			return false
		}
		if c, ok := r.cached(i); ok && c.Refusal != nil {
			r.Refused[rest] = c.Refusal
			return false
		}
		return true
	}, func(name string, data []byte) error {
		rest := strings.TrimPrefix(name, spool.EnrolRefusedPrefix)
		tid, fp, ok := strings.Cut(rest, "/")
		if !ok {
			return fmt.Errorf("unexpected name")
		}
		var rf Refusal
		if err := bundle.OpenTOML(data, refusedCtx(tid, fp), m.Pair.Age, signer, &rf); err != nil {
			return err
		}
		mu.Lock()
		r.Refused[rest] = &rf
		r.remember(name, cachedRecord{Size: int64(len(data)), Refusal: &rf})
		mu.Unlock()
		return nil
	}, junk)
	if err != nil {
		return err
	}
	if r.revocations == nil {
		r.revocations = map[string]*Revocation{}
	}
	if err := r.readLabelChanges(ctx, m, signer, fresh, junk); err != nil {
		return err
	}
	err = eachObject(ctx, m.Spool, spool.EnrolRevokePrefix, func(i spool.Info) bool {
		nodeID := strings.TrimPrefix(i.Name, spool.EnrolRevokePrefix)
		if r.revocations[nodeID] != nil || !fresh(i.Name) {
			return false
		}
		if c, ok := r.cached(i); ok && c.Revocation != nil {
			r.revocations[nodeID] = c.Revocation
			return false
		}
		return true
	}, func(name string, data []byte) error {
		nodeID := strings.TrimPrefix(name, spool.EnrolRevokePrefix)
		var rv Revocation
		if err := bundle.OpenTOML(data, revokeCtx(nodeID), m.Pair.Age, signer, &rv); err != nil {
			return err
		}
		mu.Lock()
		r.revocations[nodeID] = &rv
		r.remember(name, cachedRecord{Size: int64(len(data)), Revocation: &rv})
		mu.Unlock()
		return nil
	}, junk)
	if err != nil {
		return err
	}
	r.build()
	r.saveCache(m)
	return nil
}

// build computes identities and nodes from the admissions and
// revocations, replaying admissions in the order they happened.
func (r *Registry) build() {
	r.Identities = make(map[string]*Identity, len(r.Admitted))
	r.Nodes = make(map[string]*Node, len(r.Admitted))
	adm := make([]*Admission, 0, len(r.Admitted))
	for _, a := range r.Admitted {
		if !a.Cancelled() {
			adm = append(adm, a)
		}
	}
	sort.Slice(adm, func(i, j int) bool {
		if !adm[i].AdmittedAt.Equal(adm[j].AdmittedAt) {
			return adm[i].AdmittedAt.Before(adm[j].AdmittedAt)
		}
		return adm[i].TokenID < adm[j].TokenID
	})
	// The identities and nodes in a few large arrays: 100,000 of each,
	// made one by one, were fresh memory faulted in 4 KiB at a time.
	var mem registryMem
	for i, a := range adm {
		if r.admissible(a) {
			r.add(a, &mem, len(adm)-i)
		}
	}
	for nodeID, cs := range r.labelChanges {
		if id := r.Identities[nodeID]; id != nil {
			id.Labels = applyLabelChanges(id.Labels, cs)
		}
	}
}

// readLabelChanges reads the label changes written since r was last read.
// One that does not verify against the mesh key, or is not what its name
// says, is junk: skipped with a warning, never applied.
func (r *Registry) readLabelChanges(ctx context.Context, m *mesh.Mesh, signer ed25519.PublicKey, fresh func(string) bool, junk func(string, error)) error {
	if r.labelChanges == nil {
		r.labelChanges, r.labelsRead = map[string][]*LabelChange{}, map[string]bool{}
	}
	var mu sync.Mutex
	return eachObject(ctx, m.Spool, spool.EnrolLabelPrefix, func(i spool.Info) bool {
		if r.labelsRead[i.Name] || !fresh(i.Name) {
			return false
		}
		if c, ok := r.cached(i); ok && c.Label != nil {
			r.labelsRead[i.Name] = true
			r.labelChanges[c.Label.NodeID] = append(r.labelChanges[c.Label.NodeID], c.Label)
			return false
		}
		return true
	}, func(name string, data []byte) error {
		nodeID, seq, err := spool.ParseLabelName(name)
		if err != nil {
			return err
		}
		var c LabelChange
		if err := bundle.OpenTOML(data, labelCtx(nodeID, seq), m.Pair.Age, signer, &c); err != nil {
			return err
		}
		if c.NodeID != nodeID || c.Seq != seq {
			return fmt.Errorf("label change names identity %s, change %d", c.NodeID, c.Seq)
		}
		if err := checkLabels(c.Set); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		r.labelsRead[name] = true
		r.labelChanges[nodeID] = append(r.labelChanges[nodeID], &c)
		r.remember(name, cachedRecord{Size: int64(len(data)), Label: &c})
		return nil
	}, junk)
}

// applyLabelChanges returns labels with the changes applied in the order
// of their sequence numbers; labels itself, which an admission record
// shares, is not changed.
func applyLabelChanges(labels map[string]string, cs []*LabelChange) map[string]string {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b *LabelChange) int { return cmp.Compare(a.Seq, b.Seq) })
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	for _, c := range cs {
		for _, k := range c.Remove {
			delete(out, k)
		}
		maps.Copy(out, c.Set)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// admissible reports whether admission a stands, given the admissions
// before it. Two admits racing for one name (plain tokens, or two
// re-enrolments of one identity) may both have written a record; the first
// stands, and a later one that would take over an identity still trusted
// at its time, which it was not issued to replace, does not count.
func (r *Registry) admissible(a *Admission) bool {
	if r.Identities[a.NodeID] != nil {
		return false // one identity speaks for one admission only
	}
	n := r.Nodes[a.Name]
	if n == nil || n.Current == nil {
		return true
	}
	return !n.Current.trustedAt(a.AdmittedAt) || a.Replaces == n.Current.NodeID
}

// registryMem is where the identities and nodes of a registry are made:
// a few large arrays rather than one allocation each (see hugepage.Slab).
type registryMem struct {
	ids   hugepage.Slab[Identity]
	nodes hugepage.Slab[Node]
}

// add makes a's identity the current one of its node; the identity it
// replaces is revoked at that moment, unless it was revoked before. The
// identity, and the node if it is new, are made in mem; left is how many
// admissions may still be added (a among them), which sizes mem's next
// arrays.
func (r *Registry) add(a *Admission, mem *registryMem, left int) *Identity {
	id := mem.ids.One(left)
	*id = Identity{NodeID: a.NodeID, Name: a.Name, Host: a.Host, Labels: a.Labels, AdmittedAt: a.AdmittedAt, TokenID: a.TokenID}
	if rv := r.revocations[a.NodeID]; rv != nil {
		id.RevokedAt, id.RevokeReason = rv.RevokedAt, rv.Reason
	}
	r.Identities[a.NodeID] = id
	n := r.Nodes[a.Name]
	if n == nil {
		n = mem.nodes.One(left)
		n.Name = a.Name
		r.Nodes[a.Name] = n
	}
	if c := n.Current; c != nil {
		if c.trustedAt(a.AdmittedAt) {
			c.RevokedAt, c.RevokeReason = a.AdmittedAt, "replaced by re-enrolment"
		}
		n.Past = append(n.Past, c)
	}
	n.Current = id
	return id
}

// trustedAt reports whether the identity was trusted at time t.
func (id *Identity) trustedAt(t time.Time) bool {
	return id.RevokedAt.IsZero() || id.RevokedAt.After(t)
}

// issued returns the record of token tid, nil if no such token was
// issued. The tokens this mesh directory issued are in its journal, read
// the first time; a token it does not name (issued from another copy of
// the mesh directory, or before the journal was kept) is read from the
// spool and opened, once.
func (r *Registry) issued(ctx context.Context, m *mesh.Mesh, mu *sync.Mutex, tid string) (*Issued, error) {
	is, ok, err := r.knownIssued(m, mu, tid)
	if err != nil || ok {
		return is, err
	}
	name := spool.TokenName(tid)
	data, err := m.Spool.Get(ctx, name, 1<<20)
	if errors.Is(err, spool.ErrNotFound) {
		is = nil
	} else if err != nil {
		return nil, err
	} else {
		is = new(Issued)
		err := bundle.OpenTOML(data, tokenCtx(tid), m.Pair.Age, m.Pair.Sign.Public().(ed25519.PublicKey), is)
		if err == nil && is.TokenID != tid {
			err = fmt.Errorf("token record names token %s", is.TokenID)
		}
		if err != nil {
			// Junk: as far as this mesh knows, the token was never
			// issued.
			r.skip(mu, name, err)
			is = nil
		}
	}
	mu.Lock()
	r.Issued[tid] = is
	mu.Unlock()
	return is, nil
}

// knownIssued returns the record of token tid as Issued holds it, with
// the journal read into Issued the first time; ok is false when Issued
// does not know tid yet.
func (r *Registry) knownIssued(m *mesh.Mesh, mu *sync.Mutex, tid string) (is *Issued, ok bool, err error) {
	mu.Lock()
	defer mu.Unlock()
	if r.Issued == nil {
		r.Issued = map[string]*Issued{}
	}
	if !r.journalRead {
		if err := readTokensJournal(m, r.Issued); err != nil {
			return nil, false, err
		}
		r.journalRead = true
	}
	is, ok = r.Issued[tid]
	return is, ok, nil
}

// readTokensJournal adds the tokens the mesh directory's journal names to
// issued. A line that does not decode, or whose verifier is not its token
// id's, is left out (the token is read from the spool instead): an append
// a crash cut short.
func readTokensJournal(m *mesh.Mesh, issued map[string]*Issued) error {
	return m.Journal(mesh.TokensJournal).Read(func(line []byte) {
		var is Issued
		if json.Unmarshal(line, &is) != nil || is.Version != recordVersion {
			return
		}
		if v, err := decodeKey(is.Verifier); err != nil || token.IDOf(v) != is.TokenID {
			return
		}
		issued[is.TokenID] = &is
	})
}

// eachObject reads every object under prefix that want selects and calls
// fn for each, from several goroutines. Decoding is what costs, so it runs
// in parallel.
//
// An error of fn is about the record: it goes to junk, and the others are
// read on. Only an error reading the spool stops eachObject.
func eachObject(ctx context.Context, sp spool.Spool, prefix string, want func(spool.Info) bool, fn func(name string, data []byte) error, junk func(name string, err error)) error {
	var names []string
	if err := spool.ListQuick(ctx, sp, prefix, func(i spool.Info) error {
		if want(i) {
			names = append(names, i.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	return parallel(ctx, len(names), func(i int) error {
		data, err := sp.Get(ctx, names[i], 1<<20)
		if err != nil {
			return err
		}
		if err := fn(names[i], data); err != nil {
			junk(names[i], err)
		}
		return nil
	})
}

// parallel runs fn(0..n-1) on a few goroutines and returns the first error.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	return workpool.Run(ctx, n, 4*runtime.GOMAXPROCS(0), fn)
}

// Briefings returns the newest briefing of every trusted identity, by node
// id. Briefings from identities not admitted yet are ignored (they are
// read once the node is admitted); from revoked identities they are
// refused, and those sent after the revocation are named in the second
// result, as are briefings skipped because their signature does not
// verify and a briefings cache that could not be used or written. A
// briefing the cache holds under the name the spool lists as its node's
// newest is not opened again (see briefcache.go).
func (r *Registry) Briefings(ctx context.Context, m *mesh.Mesh) (map[string]*brief.Briefing, []string, error) {
	return r.briefings(ctx, m, "", nil)
}

// Briefing is Briefings for node id nodeID alone: only its briefings are
// listed, and the briefings cache is read but not written. The briefing
// is nil if the node sent none or is not trusted.
func (r *Registry) Briefing(ctx context.Context, m *mesh.Mesh, nodeID string) (*brief.Briefing, []string, error) {
	if nodeID == "" {
		return nil, nil, errors.New("briefing of no node")
	}
	briefs, refused, err := r.briefings(ctx, m, nodeID, nil)
	return briefs[nodeID], refused, err
}

// briefings is Briefings, or Briefing for node id only when it is set.
// If forGC is not nil, it is filled in (see SupersededBriefings).
func (r *Registry) briefings(ctx context.Context, m *mesh.Mesh, only string, forGC *GCBriefings) (map[string]*brief.Briefing, []string, error) {
	// Every briefing name by node, oldest first (the spool lists in
	// order), and the size of each node's newest (-1: not listed).
	all := map[string][]string{}
	sizes := map[string]int64{}
	prefix := spool.BriefPrefix
	if only != "" {
		prefix += only + "/"
	}
	if err := spool.ListQuick(ctx, m.Spool, prefix, func(i spool.Info) error {
		node, _, err := spool.ParseBriefName(i.Name)
		if err != nil || only != "" && node != only {
			return nil // spool verify reports strays
		}
		all[node] = append(all[node], i.Name)
		sizes[node] = i.Size
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if forGC != nil {
		forGC.Names = all
	}
	var refused []string
	cachePath := BriefingsCachePath(m.Dir, m.Spool.String())
	cache, err := readBriefingsCache(cachePath, m.Spool.String(), m.Public().Fingerprint())
	if err != nil {
		refused = append(refused, fmt.Sprintf("briefings cache %s: %v: reading the briefings in spool %s again", cachePath, err, m.Spool))
	}
	if cache == nil {
		cache = &briefingsCache{}
	}
	var todo []string
	for node, names := range all {
		name := names[len(names)-1]
		id := r.Identities[node]
		switch {
		case id == nil:
		case id.Revoked():
			// Only a briefing sent after the revocation is news: the
			// last one from before it is simply no longer read. The
			// sequence number is the host's clock, which is all there
			// is, and it decides only whether to say so.
			if _, seq, _ := spool.ParseBriefName(name); seq > uint64(id.RevokedAt.UnixNano()) {
				refused = append(refused, fmt.Sprintf("briefing %s from %s refused: identity %s was revoked at %s", name, id.Name, node, id.RevokedAt.Format(time.RFC3339)))
			}
		default:
			todo = append(todo, node)
		}
	}
	out := make(map[string]*brief.Briefing, len(todo))
	// What the cache is to hold next: each node's newest briefing, when
	// it verified.
	kept := make(map[string]cachedBriefing, len(todo))
	opened := 0
	var mu sync.Mutex
	err = parallel(ctx, len(todo), func(i int) error {
		node := todo[i]
		names := all[node]
		newest, size := names[len(names)-1], sizes[node]
		if cb, ok := cache.Briefings[newest]; ok && (size < 0 || cb.Size < 0 || cb.Size == size) {
			mu.Lock()
			out[node], kept[newest] = cb.Briefing, cb
			mu.Unlock()
			return nil
		}
		var b *brief.Briefing
		var first error
		// The newest briefing that verifies. One whose signature does
		// not verify (signed by another key, damaged) is junk anyone
		// able to write to the spool could have dropped: skipped with a
		// warning, it must not make the node ineligible. One the host
		// signed but that does not decode or check is the host's own
		// word, and makes it ineligible with the reason.
		for j := len(names) - 1; j >= 0; j-- {
			_, seq, _ := spool.ParseBriefName(names[j])
			var err error
			b, err = r.OpenBriefing(ctx, m, node, seq)
			if err == nil {
				if j == len(names)-1 {
					mu.Lock()
					kept[newest] = cachedBriefing{Size: size, Briefing: b}
					opened++
					mu.Unlock()
				}
				break
			}
			b = nil
			if ctx.Err() != nil || errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) == fault.Temporary {
				return err
			}
			if first == nil || fault.ClassOf(err) != fault.Refused {
				first = err
			}
			if fault.ClassOf(err) != fault.Refused {
				break
			}
			mu.Lock()
			refused = append(refused, fmt.Sprintf("%v: skipped", err))
			mu.Unlock()
		}
		if b == nil {
			// No briefing of the node verifies: it is ineligible, with
			// the reason, rather than stopping every command.
			b = &brief.Briefing{Version: brief.FormatVersion, Node: r.Identities[node].Name, Lines: []outcome.Line{
				{ID: "briefing", Status: outcome.Failed, Detail: first.Error()},
			}}
		}
		mu.Lock()
		out[node] = b
		mu.Unlock()
		return nil
	})
	if err == nil && forGC != nil {
		for _, node := range todo {
			names := all[node]
			newest := names[len(names)-1]
			if _, ok := kept[newest]; ok {
				for _, name := range names[:len(names)-1] {
					forGC.Superseded = append(forGC.Superseded, Superseded{Object: name, By: newest})
				}
			}
		}
		slices.SortFunc(forGC.Superseded, func(a, b Superseded) int { return strings.Compare(a.Object, b.Object) })
	}
	if err == nil && only == "" && (opened > 0 || len(kept) != len(cache.Briefings)) {
		c := &briefingsCache{Spool: m.Spool.String(), Mesh: m.Public().Fingerprint(), Briefings: kept}
		if werr := writeBriefingsCache(cachePath, c); werr != nil {
			refused = append(refused, werr.Error())
		}
	}
	sort.Strings(refused)
	return out, refused, err
}

// Superseded is an object no reader needs any more, and the newer one
// read in its place.
type Superseded struct {
	Object, By string
}

// GCBriefings is what spool gc needs of the briefings, from one listing.
type GCBriefings struct {
	// Superseded are the briefings of trusted identities older than
	// their node's newest, where that one verified, in name order. A
	// node's newest briefing that verifies is the only one read (here,
	// and by report, which reads the newest), so no reader needs the
	// older ones. A node whose newest briefing does not verify keeps all
	// of its.
	Superseded []Superseded
	// Names are the names of every briefing in the spool, by node id,
	// oldest first: what gc removes of a revoked identity, known without
	// listing its directory again.
	Names map[string][]string
}

// SupersededBriefings is Briefings for spool gc: it returns what gc needs
// of the briefings, and Briefings' warnings.
func (r *Registry) SupersededBriefings(ctx context.Context, m *mesh.Mesh) (GCBriefings, []string, error) {
	var out GCBriefings
	_, refused, err := r.briefings(ctx, m, "", &out)
	return out, refused, err
}

// OpenBriefing reads and verifies one briefing against its identity.
func (r *Registry) OpenBriefing(ctx context.Context, m *mesh.Mesh, nodeID string, seq uint64) (*brief.Briefing, error) {
	id := r.Identities[nodeID]
	if id == nil {
		return nil, fmt.Errorf("briefing from unknown node %s", nodeID)
	}
	v, err := id.Host.Verifier()
	if err != nil {
		return nil, err
	}
	name := spool.BriefName(nodeID, seq)
	data, err := m.Spool.Get(ctx, name, 1<<20)
	if err != nil {
		return nil, err
	}
	var b brief.Briefing
	if err := bundle.OpenTOML(data, BriefCtx(nodeID, seq), m.Pair.Age, v, &b); err != nil {
		return nil, fmt.Errorf("briefing %s of %s refused: %w", name, id.Name, err)
	}
	if err := b.Check(); err != nil {
		return nil, fmt.Errorf("briefing %s of %s refused: %w", name, id.Name, err)
	}
	return &b, nil
}
