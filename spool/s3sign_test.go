package spool

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The example requests of the S3 API reference's "Signature Calculations
// for the Authorization Header: Transferring Payload in a Single Chunk",
// with the signatures published there.
var awsExampleCreds = s3Credentials{AccessKey: "AKIAIOSFODNN7EXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}

var awsExampleTime = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)

func TestSignV4AWSExamples(t *testing.T) {
	for _, tc := range []struct {
		name, method, url string
		header            map[string]string
		body              string
		signed, signature string
	}{
		{
			name: "GET object", method: "GET", url: "https://examplebucket.s3.amazonaws.com/test.txt",
			header:    map[string]string{"Range": "bytes=0-9"},
			signed:    "host;range;x-amz-content-sha256;x-amz-date",
			signature: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		},
		{
			// The key's "$" is encoded in the canonical URI.
			name: "PUT object", method: "PUT", url: "https://examplebucket.s3.amazonaws.com/test$file.text",
			header:    map[string]string{"Date": "Fri, 24 May 2013 00:00:00 GMT", "X-Amz-Storage-Class": "REDUCED_REDUNDANCY"},
			body:      "Welcome to Amazon S3.",
			signed:    "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			signature: "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		},
		{
			// A parameter without a value is "lifecycle=".
			name: "GET bucket lifecycle", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?lifecycle",
			signed:    "host;x-amz-content-sha256;x-amz-date",
			signature: "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		},
		{
			// Parameters sorted by name whatever order they come in.
			name: "GET bucket (list objects)", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?prefix=J&max-keys=2",
			signed:    "host;x-amz-content-sha256;x-amz-date",
			signature: "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		},
	} {
		req, err := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		sum := sha256.Sum256([]byte(tc.body))
		signV4(req, awsExampleCreds, "us-east-1", awsExampleTime, hex.EncodeToString(sum[:]))
		want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=" +
			tc.signed + ",Signature=" + tc.signature
		if got := req.Header.Get("Authorization"); got != want {
			t.Errorf("%s: Authorization\n%s\nwant\n%s", tc.name, got, want)
		}
		if got := req.Header.Get("X-Amz-Date"); got != "20130524T000000Z" {
			t.Errorf("%s: x-amz-date %q", tc.name, got)
		}
	}
}

// TestCanonicalRequestAWSExample checks the canonical request of the GET
// object example line by line, as the reference prints it.
func TestCanonicalRequestAWSExample(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	req.Header.Set("Range", "bytes=0-9")
	req.Header.Set("User-Agent", "muster") // never signed: proxies rewrite it
	signV4(req, awsExampleCreds, "us-east-1", awsExampleTime, emptySHA256)
	req.Header.Del("Authorization")
	got, _ := canonicalRequest(req, emptySHA256)
	want := "GET\n/test.txt\n\n" +
		"host:examplebucket.s3.amazonaws.com\n" +
		"range:bytes=0-9\n" +
		"x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n" +
		"x-amz-date:20130524T000000Z\n\n" +
		"host;range;x-amz-content-sha256;x-amz-date\n" +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got != want {
		t.Errorf("canonical request\n%s\nwant\n%s", got, want)
	}
	sum := sha256.Sum256([]byte(got))
	if h := hex.EncodeToString(sum[:]); h != "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972" {
		t.Errorf("hash of the canonical request %s, want the reference's 7344ae5b…", h)
	}
}

func TestSignV4SessionToken(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	creds := awsExampleCreds
	creds.SessionToken = "token/with+chars"
	signV4(req, creds, "eu-west-1", awsExampleTime, emptySHA256)
	if got := req.Header.Get("X-Amz-Security-Token"); got != creds.SessionToken {
		t.Errorf("x-amz-security-token = %q, want the session token", got)
	}
	auth := req.Header.Get("Authorization")
	if !strings.Contains(auth, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,") ||
		!strings.Contains(auth, "/20130524/eu-west-1/s3/aws4_request,") {
		t.Errorf("Authorization %q does not sign the token in eu-west-1", auth)
	}
	// The signature covers the token: another token, another signature.
	other, _ := http.NewRequest("GET", "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	creds.SessionToken = "another"
	signV4(other, creds, "eu-west-1", awsExampleTime, emptySHA256)
	if other.Header.Get("Authorization") == auth {
		t.Error("the signature does not depend on the session token")
	}
}

func TestS3Escape(t *testing.T) {
	for _, tc := range []struct{ in, path, query string }{
		{"abc-_.~XYZ09", "abc-_.~XYZ09", "abc-_.~XYZ09"},
		{"a/b c", "a/b%20c", "a%2Fb%20c"},
		{"x+y=z&$!*'()", "x%2By%3Dz%26%24%21%2A%27%28%29", "x%2By%3Dz%26%24%21%2A%27%28%29"},
		{"é%", "%C3%A9%25", "%C3%A9%25"},
	} {
		if got := s3EscapePath(tc.in); got != tc.path {
			t.Errorf("s3EscapePath(%q) = %q, want %q", tc.in, got, tc.path)
		}
		if got := s3Escape(tc.in, false); got != tc.query {
			t.Errorf("s3Escape(%q, false) = %q, want %q", tc.in, got, tc.query)
		}
	}
	q := url.Values{"prefix": {"a/b c"}, "list-type": {"2"}, "b": {"2", "1"}, "location": {""}}
	if got, want := s3CanonicalQuery(q), "b=1&b=2&list-type=2&location=&prefix=a%2Fb%20c"; got != want {
		t.Errorf("s3CanonicalQuery = %q, want %q", got, want)
	}
}

// TestS3RequestOnTheWire checks that what the client sends is what it
// signs: the path and query encoded as in the canonical request, and the
// addressing the configuration asks for.
func TestS3RequestOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      S3Config
		region   string
		key      string
		wantHost string
		wantPath string
	}{
		{"custom endpoint: path-style", S3Config{Bucket: "bkt", Endpoint: "store:9000"}, "us-east-1", "p x/k+1",
			"store:9000", "/bkt/p%20x/k%2B1"},
		{"default port dropped", S3Config{Bucket: "bkt", Endpoint: "store:443"}, "us-east-1", "k",
			"store", "/bkt/k"},
		{"AWS: virtual-hosted", S3Config{Bucket: "bucket"}, "eu-west-1", "a/b",
			"bucket.s3.eu-west-1.amazonaws.com", "/a/b"},
		{"AWS in China", S3Config{Bucket: "bucket"}, "cn-north-1", "a",
			"bucket.s3.cn-north-1.amazonaws.com.cn", "/a"},
		{"AWS, dotted bucket over HTTPS: path-style", S3Config{Bucket: "my.bucket"}, "eu-west-1", "a",
			"s3.eu-west-1.amazonaws.com", "/my.bucket/a"},
		{"AWS, region unknown: the global endpoint", S3Config{Bucket: "bucket"}, "", "",
			"bucket.s3.amazonaws.com", "/"},
	} {
		tc.cfg.AccessKey, tc.cfg.SecretKey = "k", "s"
		s, err := OpenS3(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		req, err := s.client.newRequest(t.Context(), tc.region, s3Request{method: "GET", key: tc.key,
			query: url.Values{"prefix": {"a b/"}, "list-type": {"2"}}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if req.URL.Host != tc.wantHost || req.URL.EscapedPath() != tc.wantPath {
			t.Errorf("%s: request to %s%s, want %s%s", tc.name, req.URL.Host, req.URL.EscapedPath(), tc.wantHost, tc.wantPath)
		}
		if got, want := req.URL.RawQuery, "list-type=2&prefix=a%20b%2F"; got != want {
			t.Errorf("%s: query %q, want %q", tc.name, got, want)
		}
		if region := cmp.Or(tc.region, "us-east-1"); !strings.Contains(req.Header.Get("Authorization"), "/"+region+"/s3/aws4_request") {
			t.Errorf("%s: Authorization %q not signed for %s", tc.name, req.Header.Get("Authorization"), region)
		}
	}
}
