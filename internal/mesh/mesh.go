// Package mesh owns the operator's side of muster: the mesh key directory
// (the key pair that signs declarations and decrypts reports, and mesh.toml
// naming the default spool) and the mesh's public keys published in the
// spool, against which every command checks that the key it holds is the
// one the spool belongs to.
package mesh

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/muster-tool/muster/internal/tomlfile"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/spool"
)

// KeysObject is the spool name of the mesh's published public keys.
const KeysObject = spool.MeshKeysName

const configName = "mesh.toml"

// Published is the content of the mesh/keys object.
type Published struct {
	Keys    keys.Public `toml:"keys"`
	Created time.Time   `toml:"created"`
}

// Config is mesh.toml in the mesh directory.
type Config struct {
	Spool   string      `toml:"spool"`
	Keys    keys.Public `toml:"keys"`
	Created time.Time   `toml:"created"`
}

// Mesh is an opened mesh directory with its spool.
type Mesh struct {
	Dir    string
	Config Config
	Pair   *keys.Pair
	Spool  spool.Spool
}

// Public returns the mesh's public keys.
func (m *Mesh) Public() keys.Public { return m.Pair.Public() }

// Verifier returns the key the mesh signs with, against which its
// commits, manifests and repository indexes are verified.
func (m *Mesh) Verifier() ed25519.PublicKey { return m.Pair.Sign.Public().(ed25519.PublicKey) }

func keysContext() bundle.Context { return bundle.Context{Kind: "mesh-keys", Name: KeysObject} }

// Init creates a new mesh in dir and publishes its public keys in the spool
// at location. It refuses to overwrite an existing mesh key and refuses a
// spool that already belongs to another mesh. On failure it leaves nothing
// behind.
func Init(ctx context.Context, dir, location string, now time.Time) (*Mesh, error) {
	if dir == "" {
		return nil, fault.Usagef("no mesh directory given: pass --mesh DIR or set MUSTER_MESH")
	}
	if keys.Exists(dir, "mesh") {
		return nil, fault.WithHint(fmt.Errorf("mesh key already exists in %s, refusing to overwrite it", dir),
			"to start another mesh, choose another --mesh directory")
	}
	// Stored absolute: mesh commands run from any directory.
	location, err := spool.Absolute(location)
	if err != nil {
		return nil, err
	}
	sp, err := spool.Open(location)
	if err != nil {
		return nil, err
	}
	if _, err := sp.Stat(ctx, KeysObject); err == nil {
		return nil, fault.WithHint(fmt.Errorf("spool %s already belongs to a mesh (it has %s)", sp, KeysObject),
			"use that mesh's key directory, or give this mesh an empty spool")
	} else if !errors.Is(err, spool.ErrNotFound) {
		return nil, err
	}
	pair, err := keys.Generate()
	if err != nil {
		return nil, err
	}
	createdDir := false
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		createdDir = true
	}
	cleanup := func() {
		if createdDir {
			os.RemoveAll(dir)
			return
		}
		for _, f := range append(keys.FileNames("mesh"), configName) {
			os.Remove(filepath.Join(dir, f))
		}
	}
	if err := keys.Write(dir, "mesh", pair); err != nil {
		if createdDir {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	now = now.UTC().Truncate(time.Second)
	cfg := Config{Spool: location, Keys: pair.Public(), Created: now}
	b, err := tomlfile.Encode("# muster mesh: the spool and public keys of this mesh; see muster-init(1)", cfg)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(dir, configName), b, 0o600)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	pub, err := bundle.SignTOML(Published{Keys: pair.Public(), Created: now}, keysContext(), pair.Sign)
	if err == nil {
		err = sp.Put(ctx, KeysObject, pub)
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("publish mesh keys in spool %s: %w", sp, err)
	}
	return &Mesh{Dir: dir, Config: cfg, Pair: pair, Spool: sp}, nil
}

// Open loads the mesh in dir. location overrides the spool named in
// mesh.toml when not empty. Open checks that the spool's published mesh
// keys are this mesh's; a mismatch is a refusal.
func Open(ctx context.Context, dir, location string) (*Mesh, error) {
	if dir == "" {
		return nil, fault.Usagef("no mesh directory given: pass --mesh DIR or set MUSTER_MESH")
	}
	pair, err := keys.Load(dir, "mesh")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fault.WithHint(err, "create a mesh with: muster init --mesh DIR --spool SPOOL")
	}
	if err != nil {
		return nil, err
	}
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	if location == "" {
		location = cfg.Spool
	}
	sp, err := spool.Open(location)
	if err != nil {
		return nil, err
	}
	m := &Mesh{Dir: dir, Config: *cfg, Pair: pair, Spool: sp}
	if err := m.checkPublished(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// readConfig reads mesh.toml in dir.
func readConfig(dir string) (*Config, error) {
	var cfg Config
	path := filepath.Join(dir, configName)
	data, err := tomlfile.ReadFile(path)
	if err == nil {
		err = tomlfile.Decode(data, &cfg)
	}
	if err := tomlfile.In(path, err); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// SpoolOf returns the spool the mesh in dir names, without loading its
// keys: for commands that work on the spool alone (spool verify, gc).
func SpoolOf(dir string) (string, error) {
	cfg, err := readConfig(dir)
	if err != nil {
		return "", err
	}
	return cfg.Spool, nil
}

func (m *Mesh) checkPublished(ctx context.Context) error {
	data, err := m.Spool.Get(ctx, KeysObject, 1<<16)
	if errors.Is(err, spool.ErrNotFound) {
		return fault.WithHint(fault.Refusedf("spool %s has no published mesh keys (%s): it does not belong to this mesh", m.Spool, KeysObject),
			"check --spool, or run muster init for a new spool")
	}
	if err != nil {
		return err
	}
	var pub Published
	if err := bundle.OpenSignedTOML(data, keysContext(), m.Pair.Sign.Public().(ed25519.PublicKey), &pub); err != nil {
		return fault.WithHint(fault.New(fault.Refused, fmt.Errorf("the mesh key in %s does not match the mesh published in spool %s: %w", m.Dir, m.Spool, err)),
			"use the mesh directory this spool was created with")
	}
	if pub.Keys != m.Pair.Public() {
		return fault.Refusedf("the mesh key in %s does not match the mesh published in spool %s", m.Dir, m.Spool)
	}
	return nil
}

// FetchPublished reads and verifies the mesh's public keys in a spool
// against the signing key a host pinned.
func FetchPublished(ctx context.Context, sp spool.Spool, pinned keys.Public) (*Published, error) {
	v, err := pinned.Verifier()
	if err != nil {
		return nil, err
	}
	data, err := sp.Get(ctx, KeysObject, 1<<16)
	if err != nil {
		return nil, err
	}
	var pub Published
	if err := bundle.OpenSignedTOML(data, keysContext(), v, &pub); err != nil {
		return nil, fault.New(fault.Refused, fmt.Errorf("spool %s: mesh keys not signed by the pinned mesh key: %w", sp, err))
	}
	return &pub, nil
}

// PublishedSigner returns the signing key a spool's mesh/keys object
// publishes, given its bytes, checking that the object is signed by that
// very key: the mesh's key, as far as anyone without the mesh directory
// can tell. Commits and repository indexes are signed by it.
func PublishedSigner(data []byte) (ed25519.PublicKey, error) {
	h, err := bundle.Inspect(data)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", KeysObject, err)
	}
	if h.Mode != bundle.Signed || h.Context.Name != KeysObject {
		return nil, fmt.Errorf("object %s is not the mesh's signed public keys", KeysObject)
	}
	var pub Published
	if err := bundle.OpenSignedTOML(data, keysContext(), h.Signer, &pub); err != nil {
		return nil, fmt.Errorf("object %s: %w", KeysObject, err)
	}
	if v, err := pub.Keys.Verifier(); err != nil || !v.Equal(h.Signer) {
		return nil, fmt.Errorf("object %s is not signed by the key it publishes", KeysObject)
	}
	return h.Signer, nil
}

// VerifyPublished checks the bytes of a mesh/keys object against a pinned
// mesh fingerprint (carried by hand in an enrolment token): the keys must
// have that fingerprint and the object must be signed by them.
func VerifyPublished(data []byte, fingerprint string) (*Published, error) {
	h, err := bundle.Inspect(data)
	if err != nil {
		return nil, fault.New(fault.Refused, fmt.Errorf("mesh keys in the spool: %w", err))
	}
	var pub Published
	if err := bundle.OpenSignedTOML(data, keysContext(), h.Signer, &pub); err != nil {
		return nil, fault.New(fault.Refused, fmt.Errorf("mesh keys in the spool: %w", err))
	}
	v, err := pub.Keys.Verifier()
	if err != nil || !v.Equal(h.Signer) {
		return nil, fault.Refusedf("mesh keys in the spool are not signed by the key they publish")
	}
	if got := pub.Keys.Fingerprint(); got != fingerprint {
		return nil, fault.WithHint(fault.Refusedf("the spool belongs to mesh %s, but the token was issued by mesh %s", got, fingerprint),
			"check --spool: join the spool of the mesh that issued the token")
	}
	return &pub, nil
}
