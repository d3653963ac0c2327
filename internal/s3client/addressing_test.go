package s3client

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/testutil/s3server"
)

// captured is a transport that records the request it is given and sends
// nothing.
type captured struct{ req *http.Request }

var errNotSent = errors.New("not sent")

func (c *captured) RoundTrip(r *http.Request) (*http.Response, error) {
	c.req = r
	return nil, errNotSent
}

// TestAddressing checks where requests go and what region they are signed
// for: a custom endpoint path-style, AWS S3 virtual-hosted style at the
// region's host, path-style for a dotted bucket over HTTPS (its name
// would not match the wildcard certificate), the default port dropped,
// AWS_ENDPOINT_URL not read, FIPS endpoints when the AWS configuration
// asks for them, and only at AWS.
func TestAddressing(t *testing.T) {
	s3server.HideAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // not read: the location says where the store is
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
	for _, tc := range []struct {
		name     string
		cfg      Config
		key      string
		wantURL  string // scheme://host/path, escaped
		wantSign string
		fips     bool // AWS_USE_FIPS_ENDPOINT=true
	}{
		{"custom endpoint: path-style", Config{Bucket: "bkt", Endpoint: "store:9000", Region: "us-east-1"}, "p x/k+1",
			"https://store:9000/bkt/p%20x/k%2B1", "/us-east-1/s3/aws4_request", false},
		{"plain HTTP", Config{Bucket: "bkt", Endpoint: "store:9000", Region: "garage", Insecure: true}, "k",
			"http://store:9000/bkt/k", "/garage/s3/aws4_request", false},
		{"default port dropped", Config{Bucket: "bkt", Endpoint: "store:443", Region: "us-east-1"}, "k",
			"https://store/bkt/k", "/us-east-1/s3/aws4_request", false},
		{"AWS: virtual-hosted", Config{Bucket: "bucket", Region: "eu-west-1"}, "a/b",
			"https://bucket.s3.eu-west-1.amazonaws.com/a/b", "/eu-west-1/s3/aws4_request", false},
		{"AWS in China", Config{Bucket: "bucket", Region: "cn-north-1"}, "a",
			"https://bucket.s3.cn-north-1.amazonaws.com.cn/a", "/cn-north-1/s3/aws4_request", false},
		{"AWS, dotted bucket over HTTPS: path-style", Config{Bucket: "my.bucket", Region: "eu-west-1"}, "a",
			"https://s3.eu-west-1.amazonaws.com/my.bucket/a", "/eu-west-1/s3/aws4_request", false},
		{"AWS, FIPS", Config{Bucket: "bucket", Region: "us-gov-west-1"}, "a",
			"https://bucket.s3-fips.us-gov-west-1.amazonaws.com/a", "/us-gov-west-1/s3/aws4_request", true},
		{"custom endpoint, FIPS asked: the endpoint", Config{Bucket: "bkt", Endpoint: "store:9000", Region: "us-east-1"}, "k",
			"https://store:9000/bkt/k", "/us-east-1/s3/aws4_request", true},
	} {
		t.Setenv("AWS_USE_FIPS_ENDPOINT", strconv.FormatBool(tc.fips))
		c, err := New(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tr := &captured{}
		c.http.Transport = tr
		if _, err := c.Head(t.Context(), tc.key); !errors.Is(err, errNotSent) {
			t.Fatalf("%s: Head: %v", tc.name, err)
		}
		u := tr.req.URL
		if got := u.Scheme + "://" + u.Host + u.EscapedPath(); got != tc.wantURL {
			t.Errorf("%s: request to %s, want %s", tc.name, got, tc.wantURL)
		}
		if auth := tr.req.Header.Get("Authorization"); !strings.Contains(auth, "Credential=k/") || !strings.Contains(auth, tc.wantSign) {
			t.Errorf("%s: Authorization %q, want signed by k for %s", tc.name, auth, tc.wantSign)
		}
	}
}

// TestEndpointRefused: an endpoint that is not host or host:port is
// refused before anything is sent.
func TestEndpointRefused(t *testing.T) {
	for _, e := range []string{"http://store", "store/path", ":9000", "store:9000:1"} {
		if _, err := New(Config{Bucket: "bkt", Endpoint: e}); err == nil {
			t.Errorf("endpoint %q accepted", e)
		}
	}
}
