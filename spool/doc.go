// Package spool owns the spool: the store of immutable, uniquely named
// objects that is the only channel between the mesh and its hosts. It
// defines the Spool interface every backend implements, the object naming
// rules (ValidName), the layout of names below, the directory backend
// (Dir) and the S3 backend (S3, an adapter over the protocol client in
// internal/s3client); spool/spooltest holds the conformance suite. The spool stores
// bytes and never sees plaintext: every object is a bundle, sealed or signed
// by the layer above.
//
// # Objects
//
// An object is a name and a sequence of bytes. Once written an object never
// changes: a Put of an existing name succeeds only if it carries the same
// bytes (a no-op) and fails with ErrConflict otherwise. Create-if-absent is
// what the protocol builds on: whoever writes commit/<generation> first
// decides that generation, and whoever writes enrol/admit/<tokenid> first
// uses the token. Objects are removed only by gc (Delete). Because objects
// are write-once, merging two copies of a spool is the union of their
// objects, and the same name never means two different things.
//
// # Names
//
// A name is one or more segments separated by "/". A segment is 1 to 128
// bytes from the alphabet a-z 0-9 "." "_" "-"; it does not start with "."
// or "-" and does not end with ".". A name is at most 1024 bytes. So no
// segment is empty, "." or "..", no name starts or ends with "/", and
// every name is a relative path that stays inside the spool on any
// filesystem a spool is copied to: lower case only, so case-insensitive
// filesystems cannot merge two names; no trailing dot, which FAT drops.
// Names starting with "." are left to temp files and to tools that copy a
// spool (rsync's partial files start with "."). ValidName states the rule
// in code.
//
// Callers never make an object's name, followed by "/", the start of
// another object's name ("a/b" and "a/b/c" cannot both exist), so that every
// name maps to a file. The layout below never does; the directory backend
// refuses it with ErrConflict.
//
// Generations and sequence numbers in names are decimal, zero-padded to 20
// digits (GenerationName, SeqName), so lexical order is numeric order and a
// listing is oldest first. Node ids are opaque: the fingerprint of a node's
// keys, never a host name, so a lost copy of the spool reveals no host
// names.
//
// # Layout
//
// Each object is written by one side and sealed (age-encrypted) to its
// readers, or only signed where everyone may read it:
//
//	mesh/keys                             the mesh's public keys; signed, public
//	enrol/token/<tokenid>                 the verifier kept when a token is issued; sealed to the mesh
//	enrol/join/<tokenid>/<hostfp>         a host's join request; sealed to the mesh
//	enrol/admit/<tokenid>                 the admission record; sealed to the mesh
//	enrol/refused/<tokenid>/<hostfp>      the refusal of a join request; sealed to the mesh
//	enrol/revoke/<nodeid>                 a revocation; sealed to the mesh
//	enrol/label/<nodeid>/<seq>            a change of a node's labels (enrol label); sealed to the mesh
//	brief/<nodeid>/<seq>                  a node's briefings; sealed to the mesh
//	decl/<generation>/<runid>/<nodeid>    a node's declaration from one declare run; sealed to that node
//	decl/<generation>/<runid>/mesh        the settings of every resource that run declared; sealed to the mesh
//	manifest/<generation>/<runid>         what one declare run wrote; sealed to the mesh
//	commit/<generation>                   the commit of a generation, naming its run id; signed, public
//	report/<nodeid>/<generation>-<seq>    a node's reports; sealed to the mesh
//	repo/index/<seq>                      the mesh's package repository index; signed, public
//	repo/pool/<name>/<version>_<arch>.deb a package, as a signed bundle; public
//
// enrol/admit/<tokenid> being create-if-absent is what makes a token
// single-use. A declare run writes every node's decl/ object under its own
// run id, then commit/<generation>: that one create-if-absent write is the
// deploy, and a run that loses the race for the generation leaves only decl/
// objects no commit names, which gc can remove. A host reads the newest commit/
// and then only its own decl/ object. The helpers in name.go (CommitName,
// ReportName, ...) build these names; build them there, not by hand.
//
// # Directory backend
//
// The directory backend stores object a/b/c as the regular file a/b/c
// below the spool directory, so a spool can be copied with cp -a, rsync or
// tar, and merging two copies is copying one over the other without
// replacing files. Object files are created read-only (0444 less the
// umask) where the filesystem keeps modes; directories 0777 less the umask.
//
// A Put writes the bytes to a temp file named .muster-tmp-<random> in the
// top directory, fsyncs it, hard-links it under the object's name, fsyncs
// the object's directory (and any directory it created) and removes the
// temp name. link(2) never replaces an existing name, so of two writers
// racing for a name one wins and the other compares bytes; a reader sees
// the object only once all its bytes are on disk, and a crash leaves either
// no object or the whole object, plus at most a temp file. Filesystems
// without hard links (FAT, exFAT) get a rename that refuses to replace
// (Linux renameat2 RENAME_NOREPLACE) instead, with the same guarantees.
//
// FAT and exFAT mounted through FUSE (fusefat, exfat-fuse: how a USB stick
// is mounted where the kernel has no driver for it) have neither. There a
// Put takes an exclusive flock(2) on the spool's top directory, checks
// that the name is free, renames the temp file onto it with rename(2),
// which would replace, and lets go. A reader still sees an object whole or
// not at all, and of two Puts racing for a name on the machine that mounts
// the filesystem one wins, as both take the lock. That machine is every
// writer of a stick. What the lock cannot keep out is a writer that does
// not take it: a cp or rsync writing that very name into the spool at the
// same moment, or a Put on another machine where a filesystem without
// either operation is mounted on several at once (a network filesystem
// through FUSE). There the later of two racing writes wins; keep a spool
// that several machines write at once on a filesystem with hard links, or
// in S3.
//
// On FAT, being whole on disk is up to the driver and the stick: fsync
// reaches a FUSE driver, but not every driver passes it on to the device
// (fusefat does not), and FAT keeps no journal, so a stick pulled out
// while mounted can lose the newest objects or need fsck.fat, whatever
// wrote to it. Unmount a stick before pulling it out. syncfs(2) does not
// reach a FUSE driver at all, so PutMany fsyncs each file there. FAT has
// no mode bits (objects there are not read-only; nothing relies on it)
// and its names are case-insensitive and lose trailing dots, which the
// naming rules allow for.
//
// List reads only the directory named by the prefix up to its last "/" and
// the directories below it that match, sorting each directory's entries so
// that names come out in bytewise order. It shows regular files whose names
// are valid segments, and nothing else: not temp files, rsync's partial
// files, symlinks or anything a person left in the directory; Get and Stat
// treat a symlink or other non-regular file as no object either. Delete leaves emptied directories in
// place; gc removes the ones it empties of join requests with
// RemoveEmptyDir. A Put whose directory was removed between making it and
// linking into it makes it again and links once more.
//
// Temps lists the temp files; gc removes those older than any Put could
// take with RemoveTemp. A temp file left after the link step shares its
// bytes with a whole object, so removing it never damages one.
//
// Errors that trying again may cure (permission denied, a read-only or full
// filesystem, a network filesystem gone away) wrap ErrUnavailable and are
// classed temporary (see internal/fault), so a timer retries instead of
// reporting a failure. A spool directory that does not exist is a failure:
// the operator must create it (a disk that is not mounted leaves its mount
// point, an empty directory, which opens).
//
// # S3 backend
//
// The S3 backend keeps a spool in a bucket of an S3-compatible object
// store (AWS S3, MinIO, Ceph, Garage, versitygw). Its location is
//
//	s3://bucket/prefix?endpoint=host:port&region=R&tls=false&timeout=1m
//
// Object name N is the key prefix/N (N itself when there is no prefix).
// Without endpoint the store is AWS S3; with one it is addressed
// path-style (http(s)://host:port/bucket/key), which every S3-compatible
// store understands, and the location alone says where the store is
// (AWS_ENDPOINT_URL is not read); at AWS S3, the AWS configuration's FIPS
// and dual-stack settings (AWS_USE_FIPS_ENDPOINT,
// AWS_USE_DUALSTACK_ENDPOINT) choose the host. region defaults to AWS_REGION or
// AWS_DEFAULT_REGION, else the store is asked once (GetBucketLocation);
// tls=false talks plain HTTP; timeout bounds each request (see below).
// Any other parameter is refused, so a misspelt one is not ignored.
//
// Credentials never appear in the location. They are found as the AWS
// tools find them (the AWS SDK for Go's default chain, see
// internal/s3client): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN; a web identity token (AWS_WEB_IDENTITY_TOKEN_FILE
// with AWS_ROLE_ARN) traded with STS; the profile AWS_PROFILE (default
// "default") of the shared config file (AWS_CONFIG_FILE or ~/.aws/config)
// and the shared credentials file (AWS_SHARED_CREDENTIALS_FILE or
// ~/.aws/credentials), with static keys, credential_process, role_arn or
// SSO; a container's credentials endpoint; the instance metadata service
// (IMDSv2). A CA bundle for a store behind a private CA comes from the
// same configuration (AWS_CA_BUNDLE, or a profile's ca_bundle). Opening a
// spool reads no file: the files are read, and a source asked, on the
// first request. When no source has credentials no request is sent.
//
// S3 keys are at most 1024 bytes, prefix included, so under a prefix of P
// bytes names longer than 1023-P bytes are refused with ErrBadName.
//
// A Put first asks for the object (HEAD) and, if it exists, compares bytes,
// so re-putting costs no upload. Otherwise it is a PUT with
// "If-None-Match: *": the store creates the object only if the key is free
// and answers 412 Precondition Failed if not, and Put then reads the
// object and compares bytes (same bytes: nil; different: ErrConflict). Of
// two writers racing for a name exactly one wins. A store that ignores
// If-None-Match (some older S3-compatible stores) replaces the object
// instead, so there the guarantee holds only outside the window between a
// Put's HEAD and its PUT: two writers racing for one name within
// milliseconds can both succeed, the later one's bytes winning. The commit
// of a generation is the write this matters for; use a store that honours
// conditional writes (AWS S3 does since 2024, and so does versitygw, which
// the tests run against) when several declare runs may race. A PUT is atomic on every
// S3 store: a reader sees the whole object or none, and an interrupted
// upload leaves nothing. A report or a briefing, whose name only its
// host writes, is put without the HEAD (PutNew): one request, and on a
// store that ignores If-None-Match a second PUT of that name can only be
// its host sending the same bytes again.
//
// List pages through the store's key listing (1000 keys a request) in key
// order, which is bytewise name order; keys that are no valid name (folder
// markers, anything else in the bucket) are not shown. A key that comes
// out of that order (at or before the key before it, within a page or
// across pages) or outside the prefix asked for is an error, never
// skipped: such a listing cannot be trusted to show every object once. A
// page that fails is asked for again with the same continuation token.
// ListAfter starts the listing past a name (StartAfter), so a host that
// applied generation N lists the commits from N on, one request however
// many came before; each key comes with its ETag.
// Get refuses an object larger than its limit from the Content-Length,
// and never reads more than the limit plus one byte. Stores that keep
// objects as files (versitygw's posix backend) cannot hold "a/b" and
// "a/b/c" at once; their refusal is ErrConflict, as in the directory
// backend. DeleteMany removes up to 1000 objects a request
// (DeleteObjects, with the Content-MD5 S3 requires of it); a key the
// store does not remove there is removed with Delete (HEAD, then DELETE),
// and a store that answers NotImplemented gets Delete for every object.
// Subdirs lists with the delimiter "/", one request per 1000 directories
// however many objects they hold; from a store that ignores the delimiter
// it takes the directories from the keys.
//
// Each request (one page of a listing counts as one) has a budget of
// timeout, default 1m, for all its attempts. It is tried up to 5 times
// within it when it fails in a way trying again may cure (a 5xx answer
// other than 501 Not Implemented,
// throttling such as 503 SlowDown, a timeout, a refused or broken
// connection), waiting 200ms before the second attempt and twice as long
// before each next one, up to 5s, give or take a quarter. Each attempt
// waits at most a third of the budget to connect and for the store's
// answer to begin, so a store that accepts connections and never answers
// is tried three times and given up on after the budget, with an error
// saying that the store did not answer within it. A failure that outlasts
// the budget or the attempts wraps ErrUnavailable and is classed
// temporary, as are credentials that cannot be found or are refused and a
// missing bucket (fixed outside muster, like a directory that is not
// mounted). Errors name the store ("s3://bucket/prefix at host:port"), the
// operation and object, and the attempts made.
package spool
