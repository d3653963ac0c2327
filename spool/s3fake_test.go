package spool_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// fakeStore serves h as the S3 store of a spool s3://bucket/p (see
// openAt: 3 attempts, credentials k and s, region us-east-1).
func fakeStore(t *testing.T, h http.HandlerFunc) *spool.S3 {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return openAt(t, strings.TrimPrefix(srv.URL, "http://"), "p")
}

// s3Fail answers as S3 does when a request fails: the status and an XML
// body naming the error.
func s3Fail(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>/bucket/p/a</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>`, code, message)
}

func serveObject(w http.ResponseWriter, r *http.Request, data []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Last-Modified", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat))
	if r.Method == http.MethodGet {
		w.Write(data)
	}
}

// TestS3PutPreconditionFailed checks the conditional PUT: it carries
// If-None-Match: * and the payload's hashes, signed; the store's 412 says
// the name is taken, and the bytes decide between no-op and ErrConflict.
func TestS3PutPreconditionFailed(t *testing.T) {
	stored := []byte("run-a")
	var puts atomic.Int64
	sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodHead:
			w.WriteHeader(http.StatusNotFound) // another writer is faster
		case http.MethodPut:
			puts.Add(1)
			body := new(bytes.Buffer)
			body.ReadFrom(r.Body)
			sha, sum := sha256.Sum256(body.Bytes()), md5.Sum(body.Bytes())
			auth := r.Header.Get("Authorization")
			switch {
			case r.URL.EscapedPath() != "/bucket/p/commit/1":
				t.Errorf("PUT to %s, want /bucket/p/commit/1", r.URL.EscapedPath())
			case r.Header.Get("If-None-Match") != "*":
				t.Errorf("PUT without If-None-Match: *")
			case r.Header.Get("X-Amz-Content-Sha256") != hex.EncodeToString(sha[:]):
				t.Errorf("x-amz-content-sha256 %q is not the payload's hash", r.Header.Get("X-Amz-Content-Sha256"))
			case r.Header.Get("Content-Md5") != base64.StdEncoding.EncodeToString(sum[:]):
				t.Errorf("Content-MD5 %q is not the payload's", r.Header.Get("Content-Md5"))
			case !strings.Contains(auth, "Credential=k/") || !strings.Contains(auth, ";if-none-match;") || !strings.Contains(auth, ";x-amz-content-sha256;"):
				t.Errorf("Authorization %q does not sign the condition and the hash", auth)
			}
			s3Fail(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		case http.MethodGet:
			serveObject(w, r, stored)
		default:
			t.Errorf("unexpected %s", r.Method)
		}
	})
	if err := sp.Put(t.Context(), "commit/1", []byte("run-a")); err != nil {
		t.Errorf("Put of the bytes the store holds: %v, want nil", err)
	}
	err := sp.Put(t.Context(), "commit/1", []byte("run-b"))
	if !errors.Is(err, spool.ErrConflict) || !strings.Contains(err.Error(), "commit/1") {
		t.Errorf("Put of other bytes: %v, want ErrConflict naming the object", err)
	}
	if puts.Load() != 2 {
		t.Errorf("%d PUTs for two Puts, want 2: a 412 is an answer, not to be tried again", puts.Load())
	}
}

// TestS3PutConditionalRequestConflict: a 409 ConditionalRequestConflict
// (a concurrent write to the key in progress) is tried again, and the
// retried PUT's 412 leads to the comparison.
func TestS3PutConditionalRequestConflict(t *testing.T) {
	var puts atomic.Int64
	sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodHead:
			w.WriteHeader(http.StatusNotFound)
		case http.MethodPut:
			if puts.Add(1) == 1 {
				s3Fail(w, http.StatusConflict, "ConditionalRequestConflict", "A conflicting conditional operation is currently in progress against this resource.")
				return
			}
			s3Fail(w, http.StatusPreconditionFailed, "PreconditionFailed", "")
		case http.MethodGet:
			serveObject(w, r, []byte("x"))
		}
	})
	if err := sp.Put(t.Context(), "a", []byte("x")); err != nil || puts.Load() != 2 {
		t.Errorf("Put: %v after %d PUTs, want nil after 2", err, puts.Load())
	}
}

// TestS3ErrorAnswers checks how each error answer of the store is taken:
// whether it is tried again, and the error and hint it becomes.
func TestS3ErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter, r *http.Request)
		op      func(sp *spool.S3) error
		tries   int64
		is      error // the error wraps this
		class   fault.Class
		message string // part of the error
		hint    string // part of the hint
	}{
		{
			name: "404 NoSuchKey",
			answer: func(w http.ResponseWriter, r *http.Request) {
				s3Fail(w, 404, "NoSuchKey", "The specified key does not exist.")
			},
			op:    func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries: 1, is: spool.ErrNotFound, message: "s3://bucket/p at 127.0.0.1",
		},
		{
			name:   "404 to a HEAD, without a body",
			answer: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) },
			op:     func(sp *spool.S3) error { _, err := sp.Stat(t.Context(), "a"); return err },
			tries:  1, is: spool.ErrNotFound,
		},
		{
			name: "404 NoSuchBucket",
			answer: func(w http.ResponseWriter, r *http.Request) {
				s3Fail(w, 404, "NoSuchBucket", "The specified bucket does not exist")
			},
			op:    func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries: 1, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "get a: NoSuchBucket (HTTP 404): the specified bucket does not exist (1 attempt)",
			hint:    "create bucket bucket",
		},
		{
			name: "503 SlowDown",
			answer: func(w http.ResponseWriter, r *http.Request) {
				s3Fail(w, 503, "SlowDown", "Please reduce your request rate.")
			},
			op:    func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries: 3, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "get a: SlowDown (HTTP 503): please reduce your request rate (gave up after 3 attempts)",
			hint:    "is running and reachable",
		},
		{
			name:   "503 to a HEAD, without a body",
			answer: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) },
			op:     func(sp *spool.S3) error { _, err := sp.Stat(t.Context(), "a"); return err },
			tries:  3, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "stat a: ServiceUnavailable (HTTP 503) (gave up after 3 attempts)",
		},
		{
			name: "500 with its body cut short",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "400")
				w.WriteHeader(500)
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>Inter`))
			},
			op:    func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries: 3, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "InternalServerError (HTTP 500)",
		},
		{
			name:   "403 AccessDenied",
			answer: func(w http.ResponseWriter, r *http.Request) { s3Fail(w, 403, "AccessDenied", "Access Denied") },
			op:     func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries:  1, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "get a: AccessDenied (HTTP 403): access Denied (1 attempt)",
			hint:    "check the credentials",
		},
		{
			name:   "403 to a HEAD, without a body",
			answer: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(403) },
			op:     func(sp *spool.S3) error { return sp.Delete(t.Context(), "a") },
			tries:  1, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "delete a: AccessDenied (HTTP 403) (1 attempt)",
			hint:    "check the credentials",
		},
		{
			name:   "400 InvalidArgument",
			answer: func(w http.ResponseWriter, r *http.Request) { s3Fail(w, 400, "InvalidArgument", "Invalid Argument") },
			op:     func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries:  1, class: fault.Failure,
			message: "get a: InvalidArgument (HTTP 400): invalid Argument (1 attempt)",
		},
		{
			name: "a proxy's plain-text 502",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(502)
				w.Write([]byte("upstream connect error\nmore detail"))
			},
			op:    func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries: 3, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "get a: BadGateway (HTTP 502) (gave up after 3 attempts)",
		},
		{
			name: "an object body cut short",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				w.Write([]byte("0123456789"))
			},
			op:    func(sp *spool.S3) error { _, err := sp.Get(t.Context(), "a", 0); return err },
			tries: 3, is: spool.ErrUnavailable, class: fault.Temporary,
			message: "get a: unexpected EOF (gave up after 3 attempts)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				tc.answer(w, r)
			})
			err := tc.op(sp)
			if err == nil {
				t.Fatal("no error")
			}
			if n.Load() != tc.tries {
				t.Errorf("%d requests, want %d", n.Load(), tc.tries)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %q", err, tc.is)
			}
			if tc.class != 0 && fault.ClassOf(err) != tc.class {
				t.Errorf("error %q is classed %v, want %v", err, fault.ClassOf(err), tc.class)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not say %q", err, tc.message)
			}
			if !strings.Contains(fault.HintOf(err), tc.hint) {
				t.Errorf("hint %q does not say %q", fault.HintOf(err), tc.hint)
			}
			if strings.Contains(err.Error(), "<") {
				t.Errorf("error %q shows XML", err)
			}
		})
	}
}

// TestS3ShortBodyRetried: a GET whose body breaks off is tried again and
// succeeds when the store recovers.
func TestS3ShortBodyRetried(t *testing.T) {
	var n atomic.Int64
	sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.Header().Set("Content-Length", "10")
			w.Write([]byte("01234"))
			return
		}
		serveObject(w, r, []byte("0123456789"))
	})
	got, err := sp.Get(t.Context(), "a", 0)
	if err != nil || string(got) != "0123456789" || n.Load() != 3 {
		t.Errorf("Get = %q, %v after %d requests; want the whole object after 3", got, err, n.Load())
	}
}

// TestS3NoCredentials: when no source has credentials no request is
// sent, and the error, classed temporary, says so and names where
// credentials come from.
func TestS3NoCredentials(t *testing.T) {
	s3server.HideAWS(t)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		s3Fail(w, 403, "AccessDenied", "Access Denied")
	}))
	defer srv.Close()
	sp, err := spool.OpenS3(spool.S3Config{Bucket: "bucket", Endpoint: strings.TrimPrefix(srv.URL, "http://"), Region: "us-east-1", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sp.Get(t.Context(), "a", 0)
	if fault.ClassOf(err) != fault.Temporary || !strings.Contains(err.Error(), "get a: could not get credentials") ||
		!strings.Contains(fault.HintOf(err), "AWS_ACCESS_KEY_ID") || !strings.Contains(fault.HintOf(err), "instance role") {
		t.Errorf("Get without credentials: %v (hint %q), want a temporary error saying there are no credentials", err, fault.HintOf(err))
	}
	if requests.Load() != 0 {
		t.Errorf("%d requests sent without credentials, want none", requests.Load())
	}
}

// fakeListing answers ListObjectsV2 for keys, URL-encoding them as asked,
// with the last key of a page as its continuation token. fail says whether
// to fail the nth listing request (from 1) with 503 SlowDown.
func fakeListing(t *testing.T, keys []string, fail func(n int) bool) (*spool.S3, func() []url.Values) {
	return fakeListingOf(t, keys, listingFake{fail: func(n int, _ url.Values) bool { return fail(n) }})
}

// listingFake says how fakeListingOf answers.
type listingFake struct {
	// fail says whether to fail the nth listing request (from 1), asked
	// with query q, with 503 SlowDown; it may also wait.
	fail func(n int, q url.Values) bool
	// ignoreStartAfter lists from the first key, as a store that does
	// not know StartAfter does.
	ignoreStartAfter bool
}

// fakeListingOf is fakeListing as f says.
func fakeListingOf(t *testing.T, keys []string, f listingFake) (*spool.S3, func() []url.Values) {
	var mu sync.Mutex
	var queries []url.Values
	sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		queries = append(queries, q)
		n := len(queries)
		mu.Unlock()
		if r.Method != http.MethodGet || strings.TrimSuffix(r.URL.Path, "/") != "/bucket" || q.Get("list-type") != "2" {
			t.Errorf("%s %s, want a ListObjectsV2 request", r.Method, r.URL)
		}
		if f.fail != nil && f.fail(n, q) {
			s3Fail(w, 503, "SlowDown", "Please reduce your request rate.")
			return
		}
		from := q.Get("start-after")
		if f.ignoreStartAfter {
			from = ""
		}
		if tok := q.Get("continuation-token"); tok != "" {
			from = tok
		}
		max, _ := strconv.Atoi(q.Get("max-keys"))
		var page []string
		for _, k := range keys {
			if strings.HasPrefix(k, q.Get("prefix")) && k > from {
				page = append(page, k)
			}
		}
		truncated := len(page) > max
		page = page[:min(len(page), max)]
		var b strings.Builder
		fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys><EncodingType>url</EncodingType><IsTruncated>%v</IsTruncated>`,
			url.QueryEscape(q.Get("prefix")), len(page), max, truncated)
		for _, k := range page {
			fmt.Fprintf(&b, `<Contents><Key>%s</Key><LastModified>2026-01-02T03:04:05.000Z</LastModified><ETag>&quot;abc&quot;</ETag><Size>%d</Size><StorageClass>STANDARD</StorageClass></Contents>`,
				url.QueryEscape(k), len(k))
		}
		if truncated {
			fmt.Fprintf(&b, `<NextContinuationToken>%s</NextContinuationToken>`, page[len(page)-1])
		}
		b.WriteString(`</ListBucketResult>`)
		w.Header().Set("Content-Type", "application/xml")
		w.Write([]byte(b.String()))
	})
	return sp, func() []url.Values {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(queries)
	}
}

// TestS3ListResumes checks paging (list-type=2, max-keys, continuation
// tokens, URL-encoded keys) and that a page that fails is asked for again
// with the same continuation token, with nothing lost or repeated.
func TestS3ListResumes(t *testing.T) {
	keys := []string{"other/x", "p/a/1", "p/a/2", "p/a/3", "p/b/1", "p/b/Not A+Name", "p/b/2", "p/c/1"}
	slices.Sort(keys)
	sp, queries := fakeListing(t, keys, func(n int) bool { return n == 2 })
	sp = withPageSize(t, sp, 2)
	var got []string
	err := sp.List(t.Context(), "", func(i spool.Info) error {
		got = append(got, i.Name)
		if i.Size != int64(len("p/"+i.Name)) {
			t.Errorf("%s: size %d, want %d", i.Name, i.Size, len("p/"+i.Name))
		}
		return nil
	})
	want := []string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/1"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List = %q, %v; want %q", got, err, want)
	}
	qs := queries()
	if len(qs) < 4 {
		t.Fatalf("%d requests, want the failed page asked for again", len(qs))
	}
	first, failed, again := qs[0], qs[1], qs[2]
	if first.Get("prefix") != "p/" || first.Get("max-keys") != "2" || first.Get("encoding-type") != "url" || first.Has("start-after") || first.Has("continuation-token") {
		t.Errorf("first page asked with %v", first)
	}
	if failed.Get("continuation-token") != "p/a/2" {
		t.Errorf("second page asked with %v, want the continuation token", failed)
	}
	if again.Encode() != failed.Encode() {
		t.Errorf("after the failed page: %v, want the same page asked for again (%v)", again, failed)
	}
}

// TestS3ListOutOfOrder: a listing whose keys do not come in key order,
// within a page or from one page to the next, is an error naming the
// keys, never a skip: fn sees no key after the first out of order.
func TestS3ListOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages [][]string // each page's keys; each page but the last is truncated
		seen  []string   // what fn is given before the error
		bad   string     // the key out of order, and the one before it
	}{
		{"within a page", [][]string{{"p/a", "p/c", "p/b", "p/d"}}, []string{"a", "c"}, `"p/b" after "p/c"`},
		{"across pages", [][]string{{"p/a", "p/c"}, {"p/b"}}, []string{"a", "c"}, `"p/b" after "p/c"`},
		{"a key twice", [][]string{{"p/a", "p/b"}, {"p/b", "p/c"}}, []string{"a", "b"}, `"p/b" after "p/b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
				n, _ := strconv.Atoi(r.URL.Query().Get("continuation-token")) // page n, from 0
				var b strings.Builder
				b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name><EncodingType>url</EncodingType>`)
				for _, k := range tc.pages[n] {
					fmt.Fprintf(&b, `<Contents><Key>%s</Key><Size>1</Size></Contents>`, url.QueryEscape(k))
				}
				if n+1 < len(tc.pages) {
					fmt.Fprintf(&b, `<IsTruncated>true</IsTruncated><NextContinuationToken>%d</NextContinuationToken>`, n+1)
				} else {
					b.WriteString(`<IsTruncated>false</IsTruncated>`)
				}
				b.WriteString(`</ListBucketResult>`)
				w.Header().Set("Content-Type", "application/xml")
				w.Write([]byte(b.String()))
			})
			var seen []string
			err := sp.List(t.Context(), "", func(i spool.Info) error { seen = append(seen, i.Name); return nil })
			if err == nil || !strings.Contains(err.Error(), tc.bad) || !strings.Contains(err.Error(), "out of key order") || !strings.Contains(err.Error(), "s3://bucket/p at 127.0.0.1") {
				t.Errorf("List = %v, want an error naming the store and %s out of key order", err, tc.bad)
			}
			if !slices.Equal(seen, tc.seen) {
				t.Errorf("fn was given %q, want %q", seen, tc.seen)
			}
		})
	}
}

// TestS3ListGivesUp: a page that keeps failing uses up the attempts; each
// page that comes through gives a fresh budget.
func TestS3ListGivesUp(t *testing.T) {
	keys := []string{"p/a", "p/b", "p/c", "p/d", "p/e"}
	// Pages come through on every other request: 2 attempts each.
	sp, _ := fakeListing(t, keys, func(n int) bool { return n%2 == 0 })
	paged := withPageSize(t, sp, 1)
	var got []string
	if err := paged.List(t.Context(), "", func(i spool.Info) error { got = append(got, i.Name); return nil }); err != nil || len(got) != 5 {
		t.Errorf("List through a store failing every other request: %q, %v", got, err)
	}
	sp, _ = fakeListing(t, keys, func(n int) bool { return n > 1 })
	sp = withPageSize(t, sp, 1)
	err := sp.List(t.Context(), "", func(spool.Info) error { return nil })
	if !errors.Is(err, spool.ErrUnavailable) || !strings.Contains(err.Error(), "list /: SlowDown (HTTP 503)") {
		t.Errorf("List through a store that stops answering: %v, want ErrUnavailable", err)
	}
}

// TestS3AsksRegion: without a region the bucket's region is asked once
// (GetBucketLocation at /bucket, signed for us-east-1) and then signed
// for.
func TestS3AsksRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	for _, tc := range []struct{ answer, want string }{
		{"eu-central-1", "eu-central-1"},
		{"", "us-east-1"},
		{"EU", "eu-west-1"},
	} {
		var asked atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			if r.URL.Query().Has("location") {
				asked.Add(1)
				if strings.TrimSuffix(r.URL.Path, "/") != "/bucket" || !strings.Contains(auth, "/us-east-1/s3/aws4_request") {
					t.Errorf("location asked at %s with %q, want /bucket/ signed for us-east-1", r.URL.Path, auth)
				}
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">%s</LocationConstraint>`, tc.answer)
				return
			}
			if !strings.Contains(auth, "/"+tc.want+"/s3/aws4_request") {
				t.Errorf("store in %s: request signed %q", tc.want, auth)
			}
			serveObject(w, r, []byte("x"))
		}))
		sp, err := spool.OpenS3(spool.S3Config{Bucket: "bucket", Endpoint: strings.TrimPrefix(srv.URL, "http://"), Insecure: true, AccessKey: "k", SecretKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := sp.Get(t.Context(), "a", 0); err != nil {
				t.Errorf("store in %s: Get: %v", tc.want, err)
			}
		}
		if asked.Load() != 1 {
			t.Errorf("store in %s: location asked %d times, want once", tc.want, asked.Load())
		}
		srv.Close()
	}
}

// TestS3OddPrefix runs requests against the real store under a prefix
// with bytes that SigV4 encodes, so that the store checks the encoding the
// signature covers.
func TestS3OddPrefix(t *testing.T) {
	srv := s3server.Start(t)
	cfg, err := spool.ParseS3Location(srv.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Prefix = "odd dir+(1)/ü~$=&"
	sp := s3Open(t, cfg)
	if err := sp.Put(t.Context(), "report/a", []byte("x")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, err := sp.Get(t.Context(), "report/a", 0); err != nil || string(got) != "x" {
		t.Errorf("Get = %q, %v", got, err)
	}
	if _, err := sp.Stat(t.Context(), "report/a"); err != nil {
		t.Errorf("Stat: %v", err)
	}
	var names []string
	if err := sp.List(t.Context(), "report/", func(i spool.Info) error { names = append(names, i.Name); return nil }); err != nil || !slices.Equal(names, []string{"report/a"}) {
		t.Errorf("List = %q, %v", names, err)
	}
	if err := sp.Delete(t.Context(), "report/a"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if _, err := sp.Stat(t.Context(), "report/a"); !errors.Is(err, spool.ErrNotFound) {
		t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
	}
	// The keys of a multi-object delete and of a listing by directory
	// travel in XML, where & must be escaped.
	for _, name := range []string{"report/n1/a", "report/n2/b"} {
		if err := sp.Put(t.Context(), name, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if dirs, err := spool.Subdirs(t.Context(), sp, "report/"); err != nil || !slices.Equal(dirs, []string{"report/n1/", "report/n2/"}) {
		t.Errorf("Subdirs = %q, %v", dirs, err)
	}
	if gone, err := spool.DeleteMany(t.Context(), sp, []string{"report/n1/a", "report/n2/b"}); err != nil || !slices.Equal(gone, []bool{true, true}) {
		t.Errorf("DeleteMany = %v, %v", gone, err)
	}
	if _, err := sp.Stat(t.Context(), "report/n1/a"); !errors.Is(err, spool.ErrNotFound) {
		t.Errorf("Stat after DeleteMany: %v, want ErrNotFound", err)
	}
}

// TestS3PutManyConcurrent checks that PutMany on S3 keeps several PUTs in
// flight (a sequential batch would never have two at once) and that a
// conflict in the batch is still ErrConflict.
func TestS3PutManyConcurrent(t *testing.T) {
	const n, want = 64, 4
	var (
		mu       sync.Mutex
		inFlight int
		most     int
		gaveUp   bool
		stored   = map[string][]byte{}
	)
	sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/bucket/")
		switch r.Method {
		case http.MethodPut:
			body := new(bytes.Buffer)
			body.ReadFrom(r.Body)
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			_, exists := stored[key]
			mu.Unlock()
			// Hold the first requests until several are in flight, or
			// give up waiting: a sequential client only ever has one.
			deadline := time.After(2 * time.Second)
			for {
				mu.Lock()
				enough := most >= want || gaveUp
				mu.Unlock()
				if enough {
					break
				}
				select {
				case <-deadline:
					mu.Lock()
					gaveUp = true
					mu.Unlock()
				case <-time.After(5 * time.Millisecond):
					continue
				}
				break
			}
			mu.Lock()
			inFlight--
			if !exists {
				stored[key] = body.Bytes()
			}
			mu.Unlock()
			if exists {
				s3Fail(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
				return
			}
			w.WriteHeader(http.StatusOK)
		case http.MethodGet, http.MethodHead:
			mu.Lock()
			data, ok := stored[key]
			mu.Unlock()
			if !ok {
				s3Fail(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
				return
			}
			serveObject(w, r, data)
		}
	})
	var objs []spool.Object
	for i := range n {
		objs = append(objs, spool.Object{Name: fmt.Sprintf("decl/b/%03d", i), Data: []byte(strconv.Itoa(i))})
	}
	if err := spool.PutMany(t.Context(), sp, objs); err != nil {
		t.Fatal(err)
	}
	if most < want {
		t.Errorf("at most %d PUTs were in flight at once, want at least %d", most, want)
	}
	for _, o := range objs {
		if got := stored["p/"+o.Name]; !bytes.Equal(got, o.Data) {
			t.Fatalf("%s: stored %q, want %q", o.Name, got, o.Data)
		}
	}
	err := spool.PutMany(t.Context(), sp, []spool.Object{{Name: "decl/c/new", Data: []byte("n")}, {Name: "decl/b/007", Data: []byte("other")}})
	if !errors.Is(err, spool.ErrConflict) {
		t.Fatalf("conflicting batch: %v, want ErrConflict", err)
	}
	if got := stored["p/decl/b/007"]; string(got) != "7" {
		t.Errorf("a conflicting batch changed an object: %q", got)
	}
}

// rangeKeys are keys of the spool s3://bucket/p around every bound at
// which a long listing of report/ is split: ids starting with each hex
// digit, names equal to a bound, one between 9 and a, names past f, and
// keys outside the prefix. want are the names List gives for report/.
func rangeKeys() (keys, want []string) {
	var names []string
	for _, d := range "0123456789abcdef" {
		for i := range 5 {
			names = append(names, fmt.Sprintf("report/%c%031x/%s-%s", d, i, spool.GenerationName(1), spool.SeqName(uint64(i+1))))
		}
	}
	names = append(names, "report/1", "report/9", "report/A0/x", "report/a", "report/f", "report/g0/x", "report/zz")
	for _, n := range names {
		keys = append(keys, "p/"+n)
		if spool.ValidName(n) == nil {
			want = append(want, n)
		}
	}
	keys = append(keys, "other/x", "p/commit/1", "p/reportz/x")
	slices.Sort(keys)
	slices.Sort(want)
	return keys, want
}

// withPageSize is sp asking for size keys a page.
func withPageSize(t *testing.T, sp *spool.S3, size int) *spool.S3 {
	t.Helper()
	cfg := sp.Config()
	cfg.PageSize = size
	paged, err := spool.OpenS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return paged
}

// listed lists prefix of sp with page size size, and returns the names.
func listed(t *testing.T, sp *spool.S3, size int, prefix string) ([]string, error) {
	t.Helper()
	var got []string
	err := withPageSize(t, sp, size).List(t.Context(), prefix, func(i spool.Info) error { got = append(got, i.Name); return nil })
	return got, err
}

// TestS3ListRanges: a listing of report/ longer than a page lists the rest
// in ranges at once, split at each hex digit, and gives every name once,
// in order, whatever the names start with.
func TestS3ListRanges(t *testing.T) {
	keys, want := rangeKeys()
	// The first two ranges' first pages each wait for the other: the
	// listing goes on only if the ranges are asked for at once.
	var ranges atomic.Int32
	both := make(chan struct{})
	sp, queries := fakeListingOf(t, keys, listingFake{fail: func(_ int, q url.Values) bool {
		if q.Get("start-after") != "" && q.Get("continuation-token") == "" {
			switch ranges.Add(1) {
			case 1:
				select {
				case <-both:
				case <-time.After(10 * time.Second):
					t.Error("a range waited 10 s for another: the ranges are not listed at once")
				}
			case 2:
				close(both)
			}
		}
		return false
	}})
	got, err := listed(t, sp, 3, "report/")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List = %v\n%q\nwant\n%q", err, got, want)
	}
	qs := queries()
	if qs[0].Has("start-after") {
		t.Errorf("first page asked with %v, want from the start", qs[0])
	}
	starts := map[string]int{}
	for _, q := range qs[1:] {
		if q.Get("continuation-token") == "" {
			starts[q.Get("start-after")]++
		}
	}
	// The first page ends in the ids starting with 0; a range begins
	// there and at each digit after it.
	wantStarts := map[string]int{"p/" + want[2]: 1}
	for _, d := range "123456789abcdef" {
		wantStarts["p/report/"+string(d)] = 1
	}
	if !maps.Equal(starts, wantStarts) {
		t.Errorf("ranges began after %v, want %v", starts, wantStarts)
	}
	// Each range costs at most a page more than its keys need.
	if max := len(keys)/3 + 1 + 16; len(qs) > max {
		t.Errorf("%d requests for %d keys in pages of 3, want at most %d", len(qs), len(keys), max)
	}
}

// TestS3ListRangesStoreWithoutStartAfter: a store that ignores StartAfter
// lists every range from the start; the listing notices on the first
// range and lists the rest one page after another, every name once.
func TestS3ListRangesStoreWithoutStartAfter(t *testing.T) {
	keys, want := rangeKeys()
	sp, _ := fakeListingOf(t, keys, listingFake{ignoreStartAfter: true})
	if got, err := listed(t, sp, 3, "report/"); err != nil || !slices.Equal(got, want) {
		t.Errorf("List = %v\n%q\nwant\n%q", err, got, want)
	}
}

// TestS3ListRangesOnlyWhenLong: a listing that fits a page is one request,
// and one of a prefix whose names are not filed under ids goes page after
// page, as before.
func TestS3ListRangesOnlyWhenLong(t *testing.T) {
	keys, want := rangeKeys()
	sp, queries := fakeListingOf(t, keys, listingFake{})
	if got, err := listed(t, sp, 1000, "report/"); err != nil || !slices.Equal(got, want) || len(queries()) != 1 {
		t.Errorf("List of %d names in pages of 1000 = %v, %d names in %d requests; want 1 request", len(want), err, len(got), len(queries()))
	}
	var commits []string
	for i := range 10 {
		commits = append(commits, "p/commit/"+spool.GenerationName(uint64(i+1)))
	}
	sp, queries = fakeListingOf(t, commits, listingFake{})
	if got, err := listed(t, sp, 3, "commit/"); err != nil || len(got) != 10 {
		t.Fatalf("List of commit/ = %q, %v", got, err)
	}
	for _, q := range queries() {
		if q.Has("start-after") {
			t.Errorf("commit/ listed with %v, want page after page", q)
		}
	}
}

// TestS3ListRangeFails: a range the store keeps failing fails the listing,
// naming the store and the prefix, after every name before that range and
// none after it; an error of fn's stops the listing as it is.
func TestS3ListRangeFails(t *testing.T) {
	keys, want := rangeKeys()
	sp, _ := fakeListingOf(t, keys, listingFake{fail: func(_ int, q url.Values) bool {
		return strings.HasPrefix(q.Get("start-after"), "p/report/8")
	}})
	got, err := listed(t, sp, 3, "report/")
	if !errors.Is(err, spool.ErrUnavailable) || !strings.Contains(err.Error(), "list report/: SlowDown (HTTP 503)") || !strings.Contains(err.Error(), "s3://bucket/p at 127.0.0.1") {
		t.Errorf("List with range 8 failing: %v, want ErrUnavailable naming the store and the listing", err)
	}
	var before []string
	for _, n := range want {
		if n <= "report/8" {
			before = append(before, n)
		}
	}
	if !slices.Equal(got, before) {
		t.Errorf("fn was given %q, want the names up to report/8: %q", got, before)
	}

	stop := errors.New("enough")
	sp, _ = fakeListingOf(t, keys, listingFake{})
	paged := withPageSize(t, sp, 3)
	n := 0
	err = paged.List(t.Context(), "report/", func(i spool.Info) error {
		if n++; i.Name > "report/c" {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Errorf("List whose fn stops = %v, want fn's error as it is", err)
	}
}

// TestS3ListRangesCanceled: a listing whose context ends while a range is
// asked for fails with the context's error, never ends early with what it
// had.
func TestS3ListRangesCanceled(t *testing.T) {
	keys, _ := rangeKeys()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sp, _ := fakeListingOf(t, keys, listingFake{fail: func(_ int, q url.Values) bool {
		if strings.HasPrefix(q.Get("start-after"), "p/report/5") {
			cancel()
		}
		return false
	}})
	var got []string
	err := withPageSize(t, sp, 3).List(ctx, "report/", func(i spool.Info) error { got = append(got, i.Name); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("List canceled in range 5 = %v after %d names, want context.Canceled", err, len(got))
	}
}

// A multi-object delete carries the Content-MD5 that S3 and many
// compatible stores require of it. A key the store would not remove in
// the batch is removed on its own, and a removal that fails there fails
// the call, naming the object; a store that does not know multi-object
// deletes gets one DELETE per object, and is not asked again.
func TestS3DeleteManyFallsBack(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	batch := "refuse b" // or "not implemented"
	sp := fakeStore(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mode := batch
		mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Query().Has("delete"):
			body := new(bytes.Buffer)
			body.ReadFrom(r.Body)
			if sum := md5.Sum(body.Bytes()); r.Header.Get("Content-Md5") != base64.StdEncoding.EncodeToString(sum[:]) {
				s3Fail(w, 400, "InvalidRequest", "Missing required header for this request: Content-MD5")
				return
			}
			if mode == "not implemented" {
				s3Fail(w, 501, "NotImplemented", "A header you provided implies functionality that is not implemented")
				return
			}
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><DeleteResult><Error><Key>p/b</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error></DeleteResult>`)
		case r.Method == http.MethodHead:
			serveObject(w, r, []byte("x"))
		case r.Method == http.MethodDelete && r.URL.Path == "/bucket/p/b":
			s3Fail(w, 403, "AccessDenied", "Access Denied")
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		r := seen
		seen = nil
		return r
	}
	gone, err := spool.DeleteMany(t.Context(), sp, []string{"a", "b", "c"})
	if err == nil || !strings.Contains(err.Error(), "delete b: AccessDenied") {
		t.Errorf("DeleteMany with b refused: %v, want an error naming b", err)
	}
	if want := []bool{true, false, true}; !slices.Equal(gone, want) {
		t.Errorf("gone %v, want %v", gone, want)
	}
	if got, want := requests(), []string{"POST /bucket", "HEAD /bucket/p/b", "DELETE /bucket/p/b"}; !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}

	batch = "not implemented"
	for range 2 {
		gone, err = spool.DeleteMany(t.Context(), sp, []string{"a", "c"})
		if err != nil || !slices.Equal(gone, []bool{true, true}) {
			t.Errorf("DeleteMany on a store without multi-object deletes: %v, gone %v", err, gone)
		}
	}
	// The one-by-one removals go several at once, in any order.
	want := []string{"DELETE /bucket/p/a", "DELETE /bucket/p/a", "DELETE /bucket/p/c", "DELETE /bucket/p/c",
		"HEAD /bucket/p/a", "HEAD /bucket/p/a", "HEAD /bucket/p/c", "HEAD /bucket/p/c", "POST /bucket"}
	if got := requests(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}

// A store that ignores the delimiter lists every key: Subdirs takes the
// directories from the keys, so that spool gc still finds every run.
func TestS3SubdirsStoreIgnoresDelimiter(t *testing.T) {
	keys := []string{"p/decl/1/runa/n1", "p/decl/1/runa/n2", "p/decl/1/runb/n1", "p/decl/1/x", "p/decl/2/runc/n1"}
	sp, queries := fakeListingOf(t, keys, listingFake{})
	got, err := spool.Subdirs(t.Context(), sp, "decl/1/")
	if want := []string{"decl/1/runa/", "decl/1/runb/"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Subdirs = %q, %v; want %q", got, err, want)
	}
	for _, q := range queries() {
		if q.Get("delimiter") != "/" || q.Get("prefix") != "p/decl/1/" {
			t.Errorf("listing asked %v, want prefix p/decl/1/ and delimiter /", q)
		}
	}
}
