package declare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/tomlfile"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// write seals every node's bundle and the manifest under a new run, then
// commits generation gen, following prev (nil: the mesh's first), with one
// create-if-absent write of its commit, which names the run. Until that
// write nothing of the run counts: a failure or a lost race leaves only
// objects no commit names, which no node ever applies. It returns the
// commit.
func (p *plan) write(ctx context.Context, m *mesh.Mesh, gen uint64, prev *generation.Commit, o Options) (*generation.Commit, error) {
	run := newRunID()
	now := o.Now.UTC()
	rec := p.recoveries(o)
	// A node whose bundle cannot be sealed gets nothing and is listed
	// with the reason; the others still get the generation.
	unsealable := make([]string, len(p.nodes))
	err := pipeline(ctx, len(p.nodes), func(i int) (string, []byte, error) {
		np := &p.nodes[i]
		rcpt, err := np.id.Host.Recipient()
		if err != nil {
			unsealable[i] = err.Error()
			return "", nil, nil
		}
		buf := buffers.Get().(*bytes.Buffer)
		defer buffers.Put(buf)
		buf.Reset()
		p.encodeDeclaration(buf, np, gen, run, now, rec, i)
		data, err := bundle.Seal(buf.Bytes(), generation.DeclCtx(gen, run, np.id.NodeID), m.Pair.Sign, rcpt)
		if err != nil {
			unsealable[i] = "sealing its bundle failed: " + err.Error()
			if verr := keys.VetRecipient(rcpt); verr != nil {
				unsealable[i] = verr.Error()
			}
			return "", nil, nil
		}
		return spool.DeclName(gen, run, np.id.NodeID), data, nil
	}, func(objs []spool.Object) error {
		// Names of this run alone: no HEAD before each PUT on S3.
		return spool.PutManyNew(ctx, m.Spool, objs)
	})
	if err != nil {
		return nil, fmt.Errorf("write the declarations of generation %d: %w (nothing was committed)", gen, err)
	}
	p.drop(unsealable)
	var settings bytes.Buffer
	if err := p.encodeSettings(&settings, gen, run); err != nil {
		return nil, err
	}
	data, err := bundle.Seal(settings.Bytes(), generation.SettingsCtx(gen, run), m.Pair.Sign, m.Pair.Age.Recipient())
	if err != nil {
		return nil, err
	}
	if err := spool.PutNew(ctx, m.Spool, spool.SettingsName(gen, run), data); err != nil {
		return nil, fmt.Errorf("write the settings of generation %d: %w (nothing was committed)", gen, err)
	}
	data, err = bundle.SealTOML(p.manifest(gen, run, now), generation.ManifestCtx(gen, run), m.Pair.Sign, m.Pair.Age.Recipient())
	if err != nil {
		return nil, err
	}
	if err := spool.PutNew(ctx, m.Spool, spool.ManifestName(gen, run), data); err != nil {
		return nil, fmt.Errorf("write the manifest of generation %d: %w (nothing was committed)", gen, err)
	}
	c := generation.Commit{Version: generation.CommitVersion, Generation: gen, Run: run, DeclaredAt: now}
	if prev != nil {
		c.Previous, c.PreviousGeneration = prev.Digest, prev.Generation
	}
	if o.ValidFor > 0 {
		c.ExpiresAt = now.Add(o.ValidFor)
	}
	data, err = bundle.SignTOML(c, generation.CommitCtx(gen), m.Pair.Sign)
	if err != nil {
		return nil, err
	}
	if err := m.Spool.Put(ctx, spool.CommitName(gen), data); err != nil {
		if errors.Is(err, spool.ErrConflict) {
			return nil, &lostRace{gen: gen}
		}
		return nil, fmt.Errorf("commit generation %d: %w (it was not committed)", gen, err)
	}
	c.Digest = generation.Digest(data)
	return &c, nil
}

// Sealing is CPU work and writing waits on the disk, so they run on
// separate goroutines: as many sealers as CPUs, and a few writers that put
// the sealed bundles in batches, so that a directory spool makes a whole
// batch durable with one sync instead of one per bundle.
const (
	writers   = 4
	batchSize = 256
)

// pipeline makes objects 0..n-1 with object on a few goroutines and puts
// them in batches with put on others; an object with no data is skipped.
// It returns the first error; after it, no new work starts.
func pipeline(ctx context.Context, n int, object func(i int) (string, []byte, error), put func(objs []spool.Object) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objects := make(chan spool.Object, 2*batchSize)
	var (
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	for range min(writers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]spool.Object, 0, batchSize)
			flush := func() {
				if len(batch) > 0 && ctx.Err() == nil {
					if err := put(batch); err != nil {
						fail(err)
					}
				}
				batch = batch[:0]
			}
			for o := range objects {
				if ctx.Err() != nil {
					continue // drain, so the sealers never block
				}
				batch = append(batch, o)
				if len(batch) == batchSize {
					flush()
				}
			}
			flush()
		}()
	}
	err := workpool.Run(ctx, n, runtime.GOMAXPROCS(0), func(i int) error {
		name, data, err := object(i)
		if err != nil || data == nil {
			return err
		}
		select {
		case objects <- spool.Object{Name: name, Data: data}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(objects)
	wg.Wait()
	if first != nil {
		return first
	}
	return err
}

var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// declHeader is the part of a generation.NodeDeclaration that is not a
// table: TOML wants it before the [[resource]] and [[recovery]] tables.
// TestNodeDeclarationEncodingDecodesAsOne checks that the pieces decode as
// one NodeDeclaration.
type declHeader struct {
	Generation   uint64
	Run          string
	Node         string
	NodeID       string
	DeclaredAt   time.Time
	Prune        bool
	RecoveryFrom string
}

// write writes the header's keys. It is written by hand because, for ten
// thousand nodes, encoding it by reflection costs more than all the
// resources shared between them.
func (h declHeader) write(buf *bytes.Buffer) {
	fmt.Fprintf(buf, "version = %d\ngeneration = %d\n", generation.FormatVersion, h.Generation)
	writeKey(buf, "run", h.Run)
	writeKey(buf, "node", h.Node)
	writeKey(buf, "node_id", h.NodeID)
	buf.WriteString("declared_at = ")
	buf.WriteString(h.DeclaredAt.UTC().Format(time.RFC3339Nano))
	buf.WriteByte('\n')
	if h.Prune {
		buf.WriteString("prune = true\n")
	}
	if h.RecoveryFrom != "" {
		writeKey(buf, "recovery_from", h.RecoveryFrom)
	}
}

// writeKey writes key = "value" as a TOML basic string.
func writeKey(buf *bytes.Buffer, key, value string) {
	buf.WriteString(key)
	buf.WriteString(" = ")
	buf.Write(tomlfile.AppendString(buf.AvailableBuffer(), value))
	buf.WriteByte('\n')
}

type recoveryTable struct {
	Recovery []ledger.Entry `toml:"recovery"`
}

// encodeDeclaration writes node np's generation.NodeDeclaration as TOML:
// the header, then each resource's TOML computed once for all the nodes
// that share it, then the recovery copy of node i of rec (if rec is not
// nil), whose entries are likewise encoded once. Encoding every node's
// hundred resources by reflection would cost more than sealing and writing
// them.
func (p *plan) encodeDeclaration(buf *bytes.Buffer, np *nodePlan, gen uint64, run string, now time.Time, rec *recoveries, i int) {
	var from string
	var entries []int32
	if rec != nil {
		from, entries = rec.from[i], rec.entries[i]
	}
	declHeader{Generation: gen, Run: run, Node: np.id.Name, NodeID: np.id.NodeID,
		DeclaredAt: now, Prune: p.prune, RecoveryFrom: from}.write(buf)
	for _, e := range np.entries {
		buf.WriteByte('\n')
		buf.Write(e.toml)
	}
	for _, j := range entries {
		buf.WriteByte('\n')
		buf.Write(rec.encoded[j])
	}
}

// recoveries are the nodes' recovery copies, by node, with each distinct
// ledger entry encoded once for all the nodes that own the same thing. A
// node's copy is a list of positions in encoded, written out as its bundle
// is sealed: a list of encoded entries per node would hold ten thousand
// nodes' hundred slices until the last bundle is sealed, six times the
// memory.
type recoveries struct {
	from    []string  // by node; empty for a node without a copy
	entries [][]int32 // by node: positions in encoded
	encoded [][]byte
	index   map[ledger.Entry]int32 // position in encoded; only while adding
}

// recoveries returns the nodes' recovery copies (nil if there are none).
func (p *plan) recoveries(o Options) *recoveries {
	if o.Recovery == nil {
		return nil
	}
	r := newRecoveries(len(p.nodes))
	for i, np := range p.nodes {
		if rc, ok := o.Recovery(np.id.Name); ok && len(rc.Ledger) > 0 {
			r.add(i, rc)
		}
	}
	r.index = nil // the sealers only read encoded
	return r
}

func newRecoveries(n int) *recoveries {
	return &recoveries{from: make([]string, n), entries: make([][]int32, n), index: map[ledger.Entry]int32{}}
}

// add makes rc the recovery copy of node i, encoding the entries not seen
// before.
func (r *recoveries) add(i int, rc Recovery) {
	entries := make([]int32, len(rc.Ledger))
	for j, le := range rc.Ledger {
		k, ok := r.index[le]
		if !ok {
			k = int32(len(r.encoded))
			// A struct of strings and a bool always encodes.
			t, _ := toml.Marshal(recoveryTable{Recovery: []ledger.Entry{le}})
			r.encoded = append(r.encoded, t)
			r.index[le] = k
		}
		entries[j] = k
	}
	r.from[i], r.entries[i] = rc.NodeID, entries
}
