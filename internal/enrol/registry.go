package enrol

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
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

// Node is a node name with its current identity (nil once decommissioned)
// and the identities it had before.
type Node struct {
	Name    string
	Current *Identity
	Past    []*Identity
}

// Registry is who is trusted, computed from the spool's enrolment records.
type Registry struct {
	Issued     map[string]*Issued    // by token id
	Admitted   map[string]*Admission // by token id
	Refused    map[string]*Refusal   // by token id + "/" + host fingerprint
	Identities map[string]*Identity  // by node id
	Nodes      map[string]*Node      // by name
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

// LoadRegistry reads every enrolment record from the mesh's spool.
func LoadRegistry(ctx context.Context, m *mesh.Mesh) (*Registry, error) {
	r := &Registry{
		Issued:     map[string]*Issued{},
		Admitted:   map[string]*Admission{},
		Refused:    map[string]*Refusal{},
		Identities: map[string]*Identity{},
		Nodes:      map[string]*Node{},
	}
	signer := m.Pair.Sign.Public().(ed25519.PublicKey)
	var mu sync.Mutex
	err := eachObject(ctx, m.Spool, spool.EnrolTokenPrefix, func(name string, data []byte) error {
		id := strings.TrimPrefix(name, spool.EnrolTokenPrefix)
		var is Issued
		if err := bundle.OpenTOML(data, tokenCtx(id), m.Pair.Age, signer, &is); err != nil {
			return err
		}
		mu.Lock()
		r.Issued[id] = &is
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachObject(ctx, m.Spool, spool.EnrolAdmitPrefix, func(name string, data []byte) error {
		id := strings.TrimPrefix(name, spool.EnrolAdmitPrefix)
		var a Admission
		if err := bundle.OpenTOML(data, admitCtx(id), m.Pair.Age, signer, &a); err != nil {
			return err
		}
		mu.Lock()
		r.Admitted[id] = &a
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachObject(ctx, m.Spool, spool.EnrolRefusedPrefix, func(name string, data []byte) error {
		rest := strings.TrimPrefix(name, spool.EnrolRefusedPrefix)
		tid, fp, ok := strings.Cut(rest, "/")
		if !ok {
			return fmt.Errorf("object %s: unexpected name", name)
		}
		var rf Refusal
		if err := bundle.OpenTOML(data, refusedCtx(tid, fp), m.Pair.Age, signer, &rf); err != nil {
			return err
		}
		mu.Lock()
		r.Refused[rest] = &rf
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Admissions in the order they happened: a later one for the same
	// name replaces (and so revokes) the earlier identity.
	adm := make([]*Admission, 0, len(r.Admitted))
	for _, a := range r.Admitted {
		adm = append(adm, a)
	}
	sort.Slice(adm, func(i, j int) bool {
		if !adm[i].AdmittedAt.Equal(adm[j].AdmittedAt) {
			return adm[i].AdmittedAt.Before(adm[j].AdmittedAt)
		}
		return adm[i].TokenID < adm[j].TokenID
	})
	for _, a := range adm {
		// An admission counts only if it did not take over a trusted
		// identity it was not meant to replace (two admits racing for
		// one name with plain tokens: the first one stands).
		if n := r.Nodes[a.Name]; n != nil && n.Current != nil && !n.Current.Revoked() && a.Replaces != n.Current.NodeID {
			continue
		}
		id := &Identity{NodeID: a.NodeID, Name: a.Name, Host: a.Host, Labels: a.Labels, AdmittedAt: a.AdmittedAt, TokenID: a.TokenID}
		r.Identities[a.NodeID] = id
		n := r.Nodes[a.Name]
		if n == nil {
			n = &Node{Name: a.Name}
			r.Nodes[a.Name] = n
		}
		if n.Current != nil {
			if !n.Current.Revoked() {
				n.Current.RevokedAt = a.AdmittedAt
				n.Current.RevokeReason = "replaced by re-enrolment"
			}
			n.Past = append(n.Past, n.Current)
		}
		n.Current = id
	}
	err = eachObject(ctx, m.Spool, spool.EnrolRevokePrefix, func(name string, data []byte) error {
		nodeID := strings.TrimPrefix(name, spool.EnrolRevokePrefix)
		var rv Revocation
		if err := bundle.OpenTOML(data, revokeCtx(nodeID), m.Pair.Age, signer, &rv); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if id := r.Identities[nodeID]; id != nil && (id.RevokedAt.IsZero() || rv.RevokedAt.Before(id.RevokedAt)) {
			id.RevokedAt = rv.RevokedAt
			id.RevokeReason = rv.Reason
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// eachObject reads every object under prefix and calls fn for each, from
// several goroutines. Decoding is what costs, so it runs in parallel.
func eachObject(ctx context.Context, sp spool.Spool, prefix string, fn func(name string, data []byte) error) error {
	var names []string
	if err := sp.List(ctx, prefix, func(i spool.Info) error {
		names = append(names, i.Name)
		return nil
	}); err != nil {
		return err
	}
	return parallel(ctx, len(names), func(i int) error {
		data, err := sp.Get(ctx, names[i], 0)
		if err != nil {
			return err
		}
		if err := fn(names[i], data); err != nil {
			return fmt.Errorf("spool %s: object %s: %w", sp, names[i], err)
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
// refused, and counted in the second result.
func (r *Registry) Briefings(ctx context.Context, m *mesh.Mesh) (map[string]*brief.Briefing, []string, error) {
	newest := map[string]string{}
	if err := m.Spool.List(ctx, spool.BriefPrefix, func(i spool.Info) error {
		node, _, err := spool.ParseBriefName(i.Name)
		if err != nil {
			return nil // spool verify reports strays
		}
		if i.Name > newest[node] {
			newest[node] = i.Name
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	var refused []string
	var todo []string
	for node, name := range newest {
		id := r.Identities[node]
		switch {
		case id == nil:
		case id.Revoked():
			refused = append(refused, fmt.Sprintf("briefing %s from %s: identity %s was revoked at %s", name, id.Name, node, id.RevokedAt.Format(time.RFC3339)))
		default:
			todo = append(todo, name)
		}
	}
	sort.Strings(refused)
	out := map[string]*brief.Briefing{}
	var mu sync.Mutex
	err := parallel(ctx, len(todo), func(i int) error {
		name := todo[i]
		node, seq, _ := spool.ParseBriefName(name)
		b, err := r.OpenBriefing(ctx, m, node, seq)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A briefing that cannot be read or verified makes the node
			// ineligible, with the reason, rather than stopping every
			// command.
			b = &brief.Briefing{Version: brief.FormatVersion, Node: r.Identities[node].Name, Lines: []outcome.Line{
				{ID: "briefing", Status: outcome.Failed, Detail: err.Error()},
			}}
		}
		mu.Lock()
		out[node] = b
		mu.Unlock()
		return nil
	})
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
