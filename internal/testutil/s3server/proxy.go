package s3server

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a counting proxy in front of a Server, on a loopback port of
// its own: every request that passes through it is counted by kind, so a
// test can assert how many requests, and which, a command sends to the
// store. It forwards each request as it came, Host header included, so
// the request signatures the server checks are the client's own.
type Proxy struct {
	addr string

	mu    sync.Mutex
	seen  []string // "KIND /path", in order
	conns int      // connections clients opened
	delay time.Duration
	// inFlight are the requests being answered now, and maxInFlight the
	// most there were at once since the last Reset.
	inFlight, maxInFlight int
}

// Request kinds as Proxy counts them: a listing (GET of the bucket) is
// LIST, GetBucketLocation is LOCATION; the rest go by method.
const (
	KindList   = "LIST"
	KindGet    = "GET"
	KindHead   = "HEAD"
	KindPut    = "PUT"
	KindDelete = "DELETE"
	// KindDeleteMany is a multi-object delete (POST ?delete).
	KindDeleteMany = "DELETEMANY"
	KindLocation   = "LOCATION"
)

// Proxy starts a counting proxy in front of s, stopped when the test ends.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3server: proxy: %v", err)
	}
	p := &Proxy{addr: l.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: s.addr})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count(r)
		defer p.begin()()
		if d := p.Delay(); d > 0 {
			time.Sleep(d)
		}
		rp.ServeHTTP(w, r)
	}), ConnState: func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			p.mu.Lock()
			p.conns++
			p.mu.Unlock()
		}
	}}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return p
}

func (p *Proxy) count(r *http.Request) {
	kind := r.Method
	path := strings.Trim(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Has("location"):
		kind = KindLocation
	case r.Method == http.MethodGet && !strings.Contains(path, "/"):
		kind = KindList
	case r.Method == http.MethodPost && r.URL.Query().Has("delete"):
		kind = KindDeleteMany
	}
	p.mu.Lock()
	p.seen = append(p.seen, kind+" "+r.URL.RequestURI())
	p.mu.Unlock()
}

// begin counts a request in flight until the function it returns is
// called.
func (p *Proxy) begin() func() {
	p.mu.Lock()
	p.inFlight++
	p.maxInFlight = max(p.maxInFlight, p.inFlight)
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}
}

// MaxInFlight returns the most requests the proxy was answering at once
// since the last Reset: a client that sends one request after another
// never has two.
func (p *Proxy) MaxInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxInFlight
}

// SetDelay holds every request d before passing it on, as a store
// across a network answers later than one on loopback.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Delay is the delay SetDelay set.
func (p *Proxy) Delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// URL is Server.URL through the proxy.
func (p *Proxy) URL(prefix string) string {
	q := url.Values{"endpoint": {p.addr}, "region": {Region}, "tls": {"false"}}
	return "s3://" + Bucket + "/" + prefix + "?" + q.Encode()
}

// Endpoint is the proxy's host:port.
func (p *Proxy) Endpoint() string { return p.addr }

// Reset forgets the requests and connections counted so far.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.seen, p.conns, p.maxInFlight = nil, 0, p.inFlight
	p.mu.Unlock()
}

// Conns returns how many connections clients opened to the proxy since
// the last Reset: a client that keeps its connections open between
// requests opens no more than it has requests in flight at once.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

// Requests returns the requests counted since the last Reset, in order,
// each as "KIND /path?query".
func (p *Proxy) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// Count returns how many requests of each kind were counted since the
// last Reset.
func (p *Proxy) Count() map[string]int {
	n := map[string]int{}
	for _, r := range p.Requests() {
		kind, _, _ := strings.Cut(r, " ")
		n[kind]++
	}
	return n
}
